package collective

// HierarchicalLayout reports whether the ranks' layout runs the two-level
// all-reduce and all-gather: several hosts, the same number of ranks on
// each, at least two (see Options.Hosts). Where it does not,
// SetHierarchical changes at most the broadcast. The engine's autotuner
// asks it before it tries the hierarchical switch.
func (c *Comm) HierarchicalLayout() bool {
	return c.hier.even // fixed by NewComm
}
