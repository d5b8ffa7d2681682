"""Targets: the datastores nosqltune can run trials against."""
