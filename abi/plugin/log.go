package plugin

import "strconv"

// LogLevel is a log message's level, numbered as Extism numbers them (and as go-pdk's
// pdk.LogLevel is), so the two can be converted freely.
type LogLevel int

// The levels of Log.
const (
	LogTrace LogLevel = iota
	LogDebug
	LogInfo
	LogWarn
	LogError
)

func (l LogLevel) String() string {
	switch l {
	case LogTrace:
		return "trace"
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}
