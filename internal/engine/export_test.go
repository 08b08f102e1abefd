package engine

// HomeRows is homeRows (placement.go), for the join tests.
var HomeRows = homeRows
