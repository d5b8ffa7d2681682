"""ScyllaDB: its scylla.yaml rendered from knob values (the knob data is knobs/scylla.yaml). ScyllaDB itself is run
through the external target (systems/external): nosqltune does not install or start it."""
