// logger logs through the SDK at every level and fails the consumer named "bad".
package main

import (
	"errors"

	"github.com/allocd/allocd/abi/plugin"
)

func init() {
	plugin.Register(plugin.Info{Name: "logger", Version: "2.1", Properties: []string{"partial"}}, func(a *plugin.Args, dst []int) ([]int, error) {
		plugin.Log(plugin.LogInfo, "allocating for "+a.CID)
		if a.CID == "bad" {
			return dst, errors.New("consumer bad is refused")
		}
		return dst, nil
	})
}

func main() {}
