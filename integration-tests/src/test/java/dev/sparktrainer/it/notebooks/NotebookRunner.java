package dev.sparktrainer.it.notebooks;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import scala.tools.nsc.Settings;
import scala.tools.nsc.interpreter.IMain;
import scala.tools.nsc.interpreter.Results;
import scala.tools.nsc.interpreter.shell.ReplReporterImpl;

/**
 * Runs a notebook's Scala cells in order through the Scala 2.13 REPL ({@code IMain}, the class path
 * of this JVM: Spark and the shaded trainer jar), stopping at the first cell that does not compile
 * or throws (exit code 1). Started by {@link NotebooksIT} in its own JVM.
 *
 * <p>{@code NotebookRunner almond|zeppelin FILE}. What is not Scala is handled, and printed, as the
 * notebook's kernel would: Almond's {@code import $ivy} and {@code interp.load} lines load jars
 * that are already on this class path, so they are left out; {@code kernel.publish.html} is a
 * stand-in that prints the HTML. Zeppelin's {@code %md} paragraphs are skipped, {@code %spark.conf}
 * configures the {@code spark} session this runner creates (Zeppelin predefines {@code spark} and
 * {@code sc}), and {@code %spark} paragraphs are Scala; any other interpreter fails the run.
 */
public final class NotebookRunner {
  private NotebookRunner() {}

  public static void main(String[] args) throws Exception {
    String kind = args[0];
    JsonNode doc = new ObjectMapper().readTree(new File(args[1]));
    List<String> prelude = new ArrayList<>();
    List<String> cells = new ArrayList<>();
    if (kind.equals("almond")) {
      prelude.add(
          "object kernel { object publish { def html(html: String): Unit = println(\"[kernel.publish.html] \" + html) } }");
      for (JsonNode cell : doc.get("cells")) {
        if (!cell.get("cell_type").asText().equals("code")) {
          continue;
        }
        StringBuilder src = new StringBuilder();
        cell.get("source").forEach(s -> src.append(s.asText()));
        StringBuilder code = new StringBuilder();
        for (String line : src.toString().split("\n", -1)) {
          String t = line.strip();
          if (t.startsWith("import $ivy.") || t.startsWith("interp.load.")) {
            System.out.println("[almond magic left out] " + t);
          } else {
            code.append(line).append('\n');
          }
        }
        cells.add(code.toString());
      }
    } else if (kind.equals("zeppelin")) {
      Map<String, String> conf = new LinkedHashMap<>();
      for (JsonNode p : doc.get("paragraphs")) {
        String text = p.get("text").asText();
        String first = text.split("\n", 2)[0].strip();
        String body = text.contains("\n") ? text.substring(text.indexOf('\n') + 1) : "";
        if (first.equals("%md")) {
          continue;
        } else if (first.equals("%spark.conf")) {
          for (String line : body.split("\n")) {
            String[] kv = line.strip().split("\\s+", 2);
            if (kv.length == 2) {
              conf.put(kv[0], kv[1]);
              System.out.println("[zeppelin conf] " + kv[0] + "=" + kv[1]);
            }
          }
        } else if (first.equals("%spark")) {
          cells.add(body);
        } else if (first.startsWith("%")) {
          throw new IllegalArgumentException(
              "Paragraph with interpreter "
                  + first
                  + ": this runner knows %md,"
                  + " %spark.conf and %spark");
        } else {
          cells.add(text); // the note's default interpreter: spark (Scala)
        }
      }
      StringBuilder session =
          new StringBuilder(
              "val spark = org.apache.spark.sql.SparkSession.builder()"
                  + ".appName(\"zeppelin note\")");
      conf.forEach(
          (k, v) -> {
            if (!k.equals(
                "spark.jars")) { // the jar is on this JVM's class path, as Zeppelin puts it on the
              // REPL's
              session.append(".config(\"").append(k).append("\", \"").append(v).append("\")");
            }
          });
      prelude.add(session.append(".getOrCreate()").toString());
      prelude.add("val sc = spark.sparkContext");
    } else {
      throw new IllegalArgumentException("kind: almond or zeppelin, not " + kind);
    }

    Settings settings = new Settings();
    settings.processArgumentString("-usejavacp");
    PrintWriter out = new PrintWriter(System.out, true);
    IMain repl = new IMain(settings, new ReplReporterImpl(settings, out));
    System.out.println(
        "trainer classes from: "
            + Class.forName("dev.sparktrainer.ml.SparkTrainerEstimator")
                .getProtectionDomain()
                .getCodeSource()
                .getLocation());
    int code = 0;
    try {
      for (String p : prelude) {
        run(repl, "prelude", p);
      }
      for (int i = 0; i < cells.size(); i++) {
        run(repl, "cell " + (i + 1) + "/" + cells.size(), cells.get(i));
      }
      System.out.println("[notebook done]");
    } catch (CellFailure e) {
      System.out.println("[" + e.getMessage() + "]");
      code = 1;
    } finally {
      repl.interpret("org.apache.spark.sql.SparkSession.getActiveSession.foreach(_.stop())");
      repl.close();
    }
    System.out.flush();
    System.exit(code);
  }

  private static final class CellFailure extends Exception {
    CellFailure(String m) {
      super(m);
    }
  }

  private static void run(IMain repl, String name, String code) throws CellFailure {
    System.out.println("[" + name + "]");
    Results.Result r = repl.interpret(code);
    if (r != Results.Success$.MODULE$) {
      throw new CellFailure(name + " failed: " + r);
    }
    System.out.println("[" + name + " ok]");
  }
}
