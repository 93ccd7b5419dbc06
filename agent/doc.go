// Package agent is a module of IronCurtain for Go (see README.md).
package agent
