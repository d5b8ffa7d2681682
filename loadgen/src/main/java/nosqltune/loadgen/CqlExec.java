package nosqltune.loadgen;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs CQL statements without cqlsh (e.g. to create the YCSB keyspace and table).
 *
 * <pre>
 * CqlExec [--host 127.0.0.1] [--port 9042] [--localdc datacenter1] [--timeout-seconds 60] [-e "CQL; CQL"]...
 * </pre>
 *
 * <p>Without {@code -e}, statements are read from stdin. Statements are split on ';' (no
 * quoting awareness beyond single-quoted strings). Rows returned by a statement are printed
 * to stdout, one per line, columns separated by tabs. Exit 0 ok, 1 a statement failed,
 * 2 usage, 3 cannot connect.
 */
public final class CqlExec {
  private CqlExec() {
  }

  static List<String> split(String text) {
    List<String> out = new ArrayList<>();
    StringBuilder cur = new StringBuilder();
    boolean quoted = false;
    for (int i = 0; i < text.length(); i++) {
      char ch = text.charAt(i);
      if (ch == '\'') {
        quoted = !quoted;
      }
      if (ch == ';' && !quoted) {
        if (!cur.toString().trim().isEmpty()) {
          out.add(cur.toString().trim());
        }
        cur.setLength(0);
      } else {
        cur.append(ch);
      }
    }
    if (!cur.toString().trim().isEmpty()) {
      out.add(cur.toString().trim());
    }
    return out;
  }

  public static void main(String[] args) throws IOException {
    PrintStream out = System.out;
    System.setOut(System.err);
    String host = "127.0.0.1";
    int port = 9042;
    String dc = "datacenter1";
    int timeout = 60;
    StringBuilder script = new StringBuilder();
    boolean fromArgs = false;
    try {
      for (int i = 0; i < args.length; i++) {
        switch (args[i]) {
          case "--host":
            host = args[++i];
            break;
          case "--port":
            port = Integer.parseInt(args[++i]);
            break;
          case "--localdc":
            dc = args[++i];
            break;
          case "--timeout-seconds":
            timeout = Integer.parseInt(args[++i]);
            break;
          case "-e":
            script.append(args[++i]).append(";\n");
            fromArgs = true;
            break;
          default:
            throw new IllegalArgumentException("unknown argument: " + args[i]);
        }
      }
    } catch (RuntimeException e) {
      System.err.println("error: " + CassandraCQLClient.oneLine(e));
      System.err.println("usage: CqlExec [--host H] [--port P] [--localdc DC] [--timeout-seconds S] [-e CQL]...");
      System.exit(2);
    }
    if (!fromArgs) {
      InputStream in = System.in;
      ByteArrayOutputStream buf = new ByteArrayOutputStream();
      in.transferTo(buf);
      script.append(buf.toString(StandardCharsets.UTF_8));
    }
    Duration t = Duration.ofSeconds(timeout);
    CqlSession session;
    try {
      session = CqlSession.builder()
          .addContactPoint(new InetSocketAddress(host, port))
          .withLocalDatacenter(dc)
          .withConfigLoader(DriverConfigLoader.programmaticBuilder()
              .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, t)
              .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, t)
              .withDuration(DefaultDriverOption.CONTROL_CONNECTION_AGREEMENT_TIMEOUT, t)
              .withInt(DefaultDriverOption.NETTY_IO_SHUTDOWN_QUIET_PERIOD, 0)
              .withInt(DefaultDriverOption.NETTY_ADMIN_SHUTDOWN_QUIET_PERIOD, 0)
              .build())
          .build();
    } catch (RuntimeException e) {
      System.err.println("error: cannot connect to " + host + ":" + port + ": " + CassandraCQLClient.oneLine(e));
      System.exit(3);
      return;
    }
    int code = 0;
    try {
      for (String stmt : split(script.toString())) {
        try {
          ResultSet rs = session.execute(SimpleStatement.newInstance(stmt).setTimeout(t));
          for (Row row : rs) {
            StringBuilder sb = new StringBuilder();
            for (int c = 0; c < row.getColumnDefinitions().size(); c++) {
              if (c > 0) {
                sb.append('\t');
              }
              sb.append(row.getObject(c));
            }
            out.println(sb);
          }
        } catch (RuntimeException e) {
          System.err.println("error: statement failed: " + stmt.replaceAll("\\s+", " ") + ": "
              + CassandraCQLClient.oneLine(e));
          code = 1;
          break;
        }
      }
    } finally {
      out.flush();
      session.close();
    }
    System.exit(code);
  }
}
