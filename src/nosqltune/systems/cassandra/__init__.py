"""Apache Cassandra: provisioning from Maven, nodes and local clusters, knob placement, the trial."""
