// Package allocd carries the source of the Go SDK for plugin authors (abi and abi/plugin), which
// the allocd binary embeds so that `allocd init-plugin` can write a plugin module that builds from
// any folder, with no checkout and no proxy: the SDK depends on the standard library alone.
package allocd

import "embed"

// SDK holds abi/*.go, abi/*.s (code written in WebAssembly for the guest) and abi/plugin/*.go
// (tests included; init-plugin leaves them out).
//
//go:embed abi/*.go abi/*.s abi/plugin/*.go
var SDK embed.FS
