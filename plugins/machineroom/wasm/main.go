// Command wasm is the machineroom plugin: RocketMQ's MACHINE_ROOM
// (AllocateMessageQueueByMachineRoom) as an allocd strategy. The binding's config key
// "consumeridcs" is the JSON array of rooms to consume; a queue's room is the ROOM of its broker
// name ROOM@broker. Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/machineroom"
)

func init() { plugin.RegisterPrepared(machineroom.Info, machineroom.Prepare) }

func main() {}
