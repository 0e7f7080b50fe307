// Package guest holds probe plugins, one per folder, each doing one part of what the SDK does in
// a call (reading the input, parsing it, writing a response), so that BenchmarkGuestParts can say
// where a built-in plugin's time goes inside the guest, where a CPU profile sees only JIT code.
package guest
