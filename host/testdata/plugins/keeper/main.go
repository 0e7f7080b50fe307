// keeper keeps every consumer id and group name it is given, in a global map, next to a copy of
// its bytes, and fails a consumer's result when any kept string no longer equals its copy: the
// SDK promises that strings a strategy is given stay valid after the call, although it reuses
// its input buffer.
package main

import (
	"fmt"
	"strings"

	"github.com/allocd/allocd/abi/plugin"
)

var kept = map[string]string{} // string as given -> a copy of its bytes

func init() {
	plugin.Register(plugin.Info{Name: "keeper", Version: "1.0.0"}, func(a *plugin.Args, dst []int) ([]int, error) {
		for given, copied := range kept {
			if given != copied {
				return dst, fmt.Errorf("a kept string changed from %q to %q", copied, given)
			}
		}
		for _, s := range []string{a.Group, a.CID} {
			if _, ok := kept[s]; !ok {
				kept[s] = strings.Clone(s)
			}
		}
		if a.Self == 0 {
			for i := range a.MQAll.Len() {
				dst = append(dst, i)
			}
		}
		return dst, nil
	})
}

func main() {}
