// Command wasm is the config plugin: RocketMQ's CONFIG (AllocateMessageQueueByConfig) as an allocd
// strategy. Each consumer's list is its label "queues", a JSON array of
// {"topic","brokerName","queueId"} objects. Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/config"
)

func init() { plugin.RegisterPrepared(config.Info, config.Prepare) }

func main() {}
