// Package e2e is a module of IronCurtain for Go (see README.md).
package e2e
