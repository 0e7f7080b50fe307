// Package server is the daemon's HTTP API: JSON under /v1, plus /metrics, /healthz and /readyz.
//
//	PUT    /v1/topics/{topic}                 {"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}],
//	                                           "autoscale":{"enabled":true,"min":1,"max":64,"expandWriteDelay":"10s",...}}
//	GET    /v1/topics                         {"topics":[...]}
//	GET    /v1/topics/{topic}                 the topic, and "autoscaling": target, pending step, why it waits
//	DELETE /v1/topics/{topic}
//	GET    /v1/topics/{topic}/route[?key=K]   writable queues, or the one queue sharding key K maps to
//	POST   /v1/topics/{topic}/offsets         {"group":"g","offsets":[{"brokerName":"broker-a","queueId":3,"committed":120,"max":120,"lastWrite":"..."}]}
//	GET    /v1/groups                         {"groups":[...]}
//	PUT    /v1/groups/{group}                 {"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}
//	GET    /v1/groups/{group}                 binding, members, per topic the generation and assignment
//	DELETE /v1/groups/{group}
//	POST   /v1/groups/{group}/heartbeat       {"cid":"...","topics":["T"],"instanceId":"","labels":{},"generations":{"T":2}}
//	                                           optional "offsets":{"T":[{"brokerName","queueId","committed","max","lastWrite"}]}
//	POST   /v1/heartbeats                     {"heartbeats":[{"group":"g","heartbeat":{...}},...]}: up to 1,000
//	                                           heartbeats of any groups, each answered in its place as alone:
//	                                           {"answers":[{"status":200,"answer":{...}},{"status":404,"error":"..."}]}
//	POST   /v1/groups/{group}/leave           {"cid":"..."}
//	GET    /v1/groups/{group}/assignment?cid=C[&topic=T][&after=N][&wait=30s]   long-poll
//	POST   /v1/assignments                    {"polls":[{"group":"g","cid":"c","topics":["T"],"after":2,"wait":"30s"},...]}:
//	                                           up to 1,000 long-polls of any groups in one request, answered when one
//	                                           of them would be: {"answers":[{"status":200,"answer":{...}},
//	                                           {"status":304},...]}, 304 for a poll still waiting (send it again)
//	POST   /v1/groups/{group}/preview         a binding; the assignment it would give, and the diff
//	GET    /v1/plugins, /v1/plugins/{name}    the plugin registry's status
//	GET    /v1/plugins/{name}/module[?after=HASH][&wait=30s]   the version in force's bytes
//	                                           (application/wasm, ETag its hash); long-poll past HASH, 304 when none came
//	POST   /v1/groups/{group}/locks/queues, /unlock/queues, /locks/message-groups,
//	       /release/message-groups, /locks/check; GET /v1/groups/{group}/locks   orderly locks (locks.go)
//
// Every error is {"error":"..."} with a 4xx status for a request the client can fix (400 a bad
// value, 404 an unknown name, 405 a wrong method, 409 a conflict with the current state, 413 a
// body over the limit) and 5xx for the daemon's own trouble (507 a full disk, 500 another store
// failure, 503 shutting down). Bodies are JSON objects of known fields only: an unknown field is
// refused by name, so a typo never passes silently.
//
// An assignment long-poll that has to wait over HTTP/1.1 is taken over from net/http and parked
// in its group's waiter (park.go): it costs its connection and a small record instead of two
// goroutines and their buffers, and its answer closes the connection (Connection: close). Over
// HTTP/2 (the daemon also serves h2c) it waits in its handler.
//
// The package holds no state of its own beyond the shutdown signal and the parked polls:
// everything is asked of the coordinator, and it never writes to the store directly.
package server
