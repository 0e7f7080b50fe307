// Command wasm is the nearby plugin: RocketMQ's MACHINE_ROOM_NEARBY (AllocateMachineRoomNearby)
// around averagely, circle or hash (config "inner", with "vnodes" passed on to hash). A queue's
// and a consumer's machine room is its label "zone". Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/nearby"
)

func init() { plugin.RegisterPrepared(nearby.Info, nearby.Prepare) }

func main() {}
