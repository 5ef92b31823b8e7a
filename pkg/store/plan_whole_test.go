package store

// PlanWhole and WholeWrites expose the planner of whole entities and edges
// to the external tests, as the reference PlanHeads must agree with.
var PlanWhole = Plan

type WholeWrites = Writes
