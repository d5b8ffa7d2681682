"""What every layer above may use: paths, child processes, Java and Maven, the environment fingerprint."""
