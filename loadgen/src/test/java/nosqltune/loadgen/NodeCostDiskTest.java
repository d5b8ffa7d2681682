package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** cost.disks: a node's block device and blkio cgroup counters, from fake files rewritten between the marks. */
class NodeCostDiskTest {

  @TempDir
  Path dir;

  private static final String SELF = "pid:" + ProcessHandle.current().pid();

  /** A /sys/block/X/stat line: 17 fields, as a recent kernel prints them. */
  private static String stat(long rIos, long rSectors, long rMs, long wIos, long wSectors, long wMs, long busyMs) {
    return String.format("%8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d %8d%n",
        rIos, 7, rSectors, rMs, wIos, 9, wSectors, wMs, 0, busyMs, rMs + wMs, 0, 0, 0, 0, 0, 0);
  }

  private static String v1(String device, long read, long write) {
    return device + " Read " + read + "\n" + device + " Write " + write + "\n" + device + " Sync " + write + "\n"
        + device + " Async " + read + "\n" + device + " Discard 0\n" + device + " Total " + (read + write) + "\n"
        + "Total " + (read + write) + "\n";
  }

  private static Path write(Path file, String text) throws IOException {
    Files.createDirectories(file.getParent());
    Files.write(file, text.getBytes(StandardCharsets.US_ASCII));
    return file;
  }

  private static Properties props(String nodes, String disks) {
    Properties p = new Properties();
    p.setProperty("cost.nodes", nodes);
    p.setProperty("cost.disks", disks);
    return p;
  }

  /** Runs `between` between the marks; returns what the run wrote on stderr. */
  private static String measure(NodeCost cost, IoAction between) throws IOException {
    PrintStream err = System.err;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    System.setErr(new PrintStream(buf, true, StandardCharsets.UTF_8));
    try {
      cost.markStart();
      between.run();
      cost.markEnd();
    } finally {
      System.setErr(err);
      cost.close();
    }
    return buf.toString(StandardCharsets.UTF_8);
  }

  interface IoAction {
    void run() throws IOException;
  }

  @Test
  void theDeviceAndACgroupV1GroupAreAddedToTheNodesOwnFigures() throws Exception {
    Path stat = write(dir.resolve("loop3/stat"), stat(100, 800, 40, 10, 160, 5, 30));
    Path group = dir.resolve("blkio/cassandra");
    write(group.resolve("blkio.throttle.io_serviced"), v1("7:3", 90, 10) + v1("8:0", 5000, 5000));
    write(group.resolve("blkio.throttle.io_service_bytes"), v1("7:3", 90 * 4096, 10 * 8192));
    NodeCost cost = NodeCost.open(props(SELF, stat + "|" + group + "@7:3"));
    String err = measure(cost, () -> {
      write(stat, stat(160, 1312, 70, 30, 1184, 25, 80));
      write(group.resolve("blkio.throttle.io_serviced"), v1("7:3", 140, 25) + v1("8:0", 9000, 9000));
      write(group.resolve("blkio.throttle.io_service_bytes"), v1("7:3", 140 * 4096, 25 * 8192));
    });
    assertEquals("", err);
    Map<String, Double> node = cost.deltas().get("node1");
    assertEquals(60, node.get(NodeCost.DEV_READ_IOS), 1e-9);
    assertEquals(20, node.get(NodeCost.DEV_WRITE_IOS), 1e-9);
    assertEquals(512 * 512, node.get(NodeCost.DEV_READ_BYTES), 1e-9);
    assertEquals(1024 * 512, node.get(NodeCost.DEV_WRITE_BYTES), 1e-9);
    assertEquals(30, node.get(NodeCost.DEV_READ_MS), 1e-9);
    assertEquals(20, node.get(NodeCost.DEV_WRITE_MS), 1e-9);
    assertEquals(50, node.get(NodeCost.DEV_BUSY_MS), 1e-9);
    assertEquals(50, node.get(NodeCost.GROUP_READ_IOS), 1e-9);      // 7:3's, not 8:0's
    assertEquals(15, node.get(NodeCost.GROUP_WRITE_IOS), 1e-9);
    assertEquals(50 * 4096, node.get(NodeCost.GROUP_READ_BYTES), 1e-9);
    assertEquals(15 * 8192, node.get(NodeCost.GROUP_WRITE_BYTES), 1e-9);
    assertTrue(node.containsKey(NodeCost.CPU), "the node's source's figures stay: " + node);
    assertFalse(cost.deltas().get("client").containsKey(NodeCost.DEV_READ_IOS));

    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    cost.print(new PrintStream(buf, true, StandardCharsets.UTF_8), 1000);
    String text = buf.toString(StandardCharsets.UTF_8);
    assertTrue(text.contains("[COST], node1.DevReadIOs, 60.000\n"), text);
    assertTrue(text.contains("[COST], node1.GroupWriteBytes, 122880.000\n"), text);
    assertTrue(text.contains("[COST], node1.CpuTime(ms), "), text);
  }

  @Test
  void aCgroupV2DeviceTheGroupHadNotUsedYetCountsFromZero() throws Exception {
    Path stat = write(dir.resolve("loop5/stat"), stat(0, 0, 0, 0, 0, 0, 0));
    // a folder may hold an '@': the last one splits
    Path group = dir.resolve("user@1000.service/node2");
    write(group.resolve("io.stat"), "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n");
    NodeCost cost = NodeCost.open(props(SELF + "," + SELF, "," + stat + "|" + group + "@7:5"));
    String err = measure(cost, () -> write(group.resolve("io.stat"),
        "8:0 rbytes=9 wbytes=9 rios=9 wios=9 dbytes=0 dios=0\n"
            + "7:5 rbytes=65536 wbytes=1048576 rios=16 wios=8 dbytes=0 dios=0 cost.usage=12\n"));
    assertEquals("", err);
    assertFalse(cost.deltas().get("node1").containsKey(NodeCost.DEV_READ_IOS), "an empty entry: no disk");
    Map<String, Double> node = cost.deltas().get("node2");
    assertEquals(16, node.get(NodeCost.GROUP_READ_IOS), 1e-9);
    assertEquals(8, node.get(NodeCost.GROUP_WRITE_IOS), 1e-9);
    assertEquals(65536, node.get(NodeCost.GROUP_READ_BYTES), 1e-9);
    assertEquals(1048576, node.get(NodeCost.GROUP_WRITE_BYTES), 1e-9);
    assertEquals(0, node.get(NodeCost.DEV_READ_IOS), 1e-9);
  }

  @Test
  void aStatFileAloneGivesTheDeviceFiguresOnly() throws Exception {
    Path stat = write(dir.resolve("vdb/stat"), stat(1, 8, 1, 2, 16, 2, 3));
    NodeCost cost = NodeCost.open(props(SELF, stat.toString()));
    measure(cost, () -> write(stat, stat(11, 88, 6, 2, 16, 2, 9)));
    Map<String, Double> node = cost.deltas().get("node1");
    assertEquals(10, node.get(NodeCost.DEV_READ_IOS), 1e-9);
    assertEquals(0, node.get(NodeCost.DEV_WRITE_IOS), 1e-9);
    assertEquals(80 * 512, node.get(NodeCost.DEV_READ_BYTES), 1e-9);
    assertEquals(6, node.get(NodeCost.DEV_BUSY_MS), 1e-9);
    assertFalse(node.containsKey(NodeCost.GROUP_READ_IOS));
  }

  @Test
  void whatCannotBeReadGivesAWarningOnceAndNoFiguresButNeverFails() throws Exception {
    Path stat = write(dir.resolve("loop1/stat"), stat(1, 8, 1, 1, 8, 1, 2));
    Path gone = dir.resolve("nothing/stat");
    Path noGroup = dir.resolve("no-such-group");
    Properties p = props(SELF + "," + SELF + ",bogus:1," + SELF,
        gone + "," + stat + "|" + noGroup + "@7:1," + stat + ",/x|/y,/too/many");
    ByteArrayOutputStream openErr = new ByteArrayOutputStream();
    PrintStream err = System.err;
    System.setErr(new PrintStream(openErr, true, StandardCharsets.UTF_8));
    NodeCost cost;
    try {
      cost = NodeCost.open(p);
    } finally {
      System.setErr(err);
    }
    String opened = openErr.toString(StandardCharsets.UTF_8);
    assertTrue(opened.contains("no cost figures for node3"), opened);
    assertTrue(opened.contains("no disk figures for node4 (/x|/y): IllegalArgumentException"), opened);
    assertTrue(opened.contains("cost.disks entry 5 (/too/many) has no cost.nodes source"), opened);

    String run = measure(cost, () -> write(stat, stat(5, 40, 3, 1, 8, 1, 4)));
    assertEquals(1, count(run, "node1's disk"), run);
    assertEquals(1, count(run, "node2's blkio group " + noGroup + " (7:1)"), run);
    assertTrue(run.contains("cost of node1's disk " + gone + " not read at the phase's start"), run);
    Map<String, Map<String, Double>> d = cost.deltas();
    assertFalse(d.get("node1").containsKey(NodeCost.DEV_READ_IOS));
    assertTrue(d.get("node1").containsKey(NodeCost.CPU));
    assertEquals(4, d.get("node2").get(NodeCost.DEV_READ_IOS), 1e-9);   // the device, though its group failed
    assertFalse(d.get("node2").containsKey(NodeCost.GROUP_READ_IOS));
    // a node whose own source could not be opened keeps its disk's figures
    assertEquals(4, d.get("node3").get(NodeCost.DEV_READ_IOS), 1e-9);
    assertFalse(d.get("node3").containsKey(NodeCost.CPU));
    assertFalse(d.get("node4").containsKey(NodeCost.DEV_READ_IOS));
  }

  @Test
  void aFileThatVanishesBeforeTheEndGivesNoFigures() throws Exception {
    Path stat = write(dir.resolve("loop2/stat"), stat(1, 8, 1, 1, 8, 1, 2));
    NodeCost cost = NodeCost.open(props(SELF, stat.toString()));
    String err = measure(cost, () -> Files.delete(stat));
    assertEquals(1, count(err, "not read at the phase's end"), err);
    assertFalse(cost.deltas().get("node1").containsKey(NodeCost.DEV_READ_IOS));
    assertTrue(cost.deltas().get("node1").containsKey(NodeCost.CPU));
  }

  private static int count(String text, String part) {
    int n = 0;
    for (int i = text.indexOf(part); i >= 0; i = text.indexOf(part, i + 1)) {
      n++;
    }
    return n;
  }
}
