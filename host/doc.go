// Package host runs allocd strategy plugins: WebAssembly modules that speak ABI v1 (see
// abi/ABI.md), on wazero, with the Extism imports implemented natively in Go.
//
// A Runtime compiles modules (keeping compiled code in an optional cache folder across restarts)
// and implements the imports; a Plugin is one compiled module with a pool of instances that serve
// concurrent Allocate calls, each call bounded by a deadline, a memory cap and an output cap. Every
// answer is checked (abi.Validate) before it is returned: a plugin that traps, loops, eats memory
// or answers nonsense costs its caller an error naming the plugin and the cause, never the
// process.
//
// The host never gives a plugin the file system, the network, the environment, the real clock or
// real randomness, so every host computes the same answer from the same request.
package host
