// Package strategy runs an allocd strategy plugin inside an application: the same .wasm
// modules, the same checks and the same hot reload as the daemon, with no daemon on the call
// path. The Kafka and RocketMQ adapters (adapters/kafka, adapters/rocketmq) stand on it; any Go
// program can use it to ask a strategy for a whole group's assignment with plain Go types.
//
// A strategy comes from one of two sources:
//
//   - a .wasm file (Config.File), watched: a new version is read once complete, loaded,
//     self-tested and validated before it replaces the running one (the registry package's
//     rule, the daemon's own); a bad version leaves the previous one serving;
//   - a running daemon (Config.Daemon and Config.Name), which serves the module of its
//     plugin's version in force at GET /v1/plugins/{name}/module and long-polls for the next.
//     The client judges every module itself by the same rule before it uses it, keeps the last
//     good one while the daemon is unreachable or serves a bad one, and caches it on disk, so a
//     restart without the daemon still works.
//
// What the package must never do: break the caller on a plugin's failure. A failed call is an
// error for that call only; the version serving stays, and the caller decides its fallback.
package strategy
