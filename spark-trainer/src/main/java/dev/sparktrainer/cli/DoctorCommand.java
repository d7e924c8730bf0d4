package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.engine.EngineCheck;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code doctor}: whether PyTorch trains in this JVM, with {@link EngineCheck} — the same check the
 * executors of a {@code train --gpus} job run before training.
 */
final class DoctorCommand extends Command {
  DoctorCommand() {
    super(
        "doctor",
        "[options]",
        "Checks that PyTorch can train here: loads DJL's PyTorch engine and names the libtorch it found\n"
            + "(version, path, flavor), the DJL JNI for it and what that JNI is built for, and the CUDA version;\n"
            + "then runs one tiny forward, backward and update on each visible GPU (the CPU when there is none).\n"
            + "Exits 0 when everything works, 1 with one line saying what is wrong and what to do. Run it on\n"
            + "a GPU node, or in the CUDA image (deploy/docker/Dockerfile.cuda); see docs/cluster.md#gpus.\n"
            + "It reads PYTORCH_LIBRARY_PATH, PYTORCH_VERSION and PYTORCH_FLAVOR as DJL does.");
  }

  @Override
  void define(Flags f) {
    f.add(
        "gpu",
        Kind.LIST,
        "ID",
        null,
        "run the test step on this GPU only (repeatable; default: every visible GPU)");
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    if (f.given("master") && !f.string("master").startsWith("local")) {
      throw new CliException(
          "doctor checks the machine it runs on, not a cluster (--master "
              + f.string("master")
              + "): run it on a GPU node or in the image; the executors of train --gpus run the same"
              + " check themselves before training");
    }
    gpus(f);
  }

  private static List<Integer> gpus(Flags f) {
    if (!f.given("gpu")) {
      return null;
    }
    List<Integer> ids = new ArrayList<>();
    for (String s : f.list("gpu")) {
      try {
        int id = Integer.parseInt(s.trim());
        if (id < 0) {
          throw new NumberFormatException();
        }
        ids.add(id);
      } catch (NumberFormatException e) {
        throw new CliException(
            "Invalid " + f.source("gpu") + " '" + s + "': expected a GPU index (0, 1, ...)");
      }
    }
    return ids;
  }

  @Override
  int run(Flags f, CliContext ctx) {
    EngineCheck.Report r = EngineCheck.run(gpus(f));
    ctx.out.print(r.text());
    ctx.out.flush();
    if (!r.ok()) {
      ctx.err.println("error: " + r.problem());
      return SparkTrainerCli.EXIT_FAILURE;
    }
    return SparkTrainerCli.EXIT_OK;
  }
}
