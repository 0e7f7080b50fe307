// Package wholegrouptest tests the SDK's whole-group form (plugin.RegisterWholeGroup) in a process
// of its own: a process registers one strategy, and abi/plugin's own tests register another.
package wholegrouptest
