//go:build !linux

package procguard

func nonDumpable() error { return ErrUnsupported }

func dumpable() (bool, error) { return true, ErrUnsupported }
