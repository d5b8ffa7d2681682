"""`nosqltune report`: one self-contained HTML page (plots embedded, no network needed) plus the plots as PNG
files, from a study store: what was tuned and where, how each optimizer converged, what the repeated
comparisons prove, which knobs moved and mattered, the node's internals for default vs best, predicted vs
measured, and the best configuration as a cassandra.yaml fragment."""
