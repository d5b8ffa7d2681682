package nosqltune.loadgen;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** A node's cassandra.yaml as the Python side renders it (the settings the SSTable writers' tool mode reads). */
final class NodeYaml {

  private NodeYaml() {
  }

  /** {@code <node>/cassandra.yaml}, written once, its directories under {@code node}. */
  static Path in(Path node) throws IOException {
    Path yaml = node.resolve("cassandra.yaml");
    if (!Files.exists(yaml)) {
      Files.writeString(yaml, String.join("\n",
          "cluster_name: test",
          "partitioner: org.apache.cassandra.dht.Murmur3Partitioner",
          "endpoint_snitch: SimpleSnitch",
          "commitlog_sync: periodic",
          "commitlog_sync_period: 10000ms",
          "storage_compatibility_mode: CASSANDRA_4",
          "data_file_directories: [" + node.resolve("data") + "]",
          "commitlog_directory: " + node.resolve("commitlog"),
          "saved_caches_directory: " + node.resolve("saved_caches"),
          "hints_directory: " + node.resolve("hints"),
          "seed_provider:",
          "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
          "    parameters:",
          "      - seeds: 127.0.0.1:7000",
          ""));
    }
    return yaml;
  }
}
