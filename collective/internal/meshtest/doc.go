// Package meshtest builds meshes of in-process ranks for the tests of
// collective and its engine: in memory, over loopback TCP, or through
// shared-memory rings, and one Comm per rank over them.
package meshtest
