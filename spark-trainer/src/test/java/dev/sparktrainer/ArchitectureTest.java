package dev.sparktrainer;

import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideOutsideOfPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import ai.djl.ndarray.NDArray;
import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaMethodCall;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

/**
 * The layers of the trainer, checked on its compiled classes (and those of {@code
 * tfrecord-datasource} it is built with) every time the tests run: a rule broken here fails the
 * build, naming the classes and the dependency that broke it. The design behind each rule is in the
 * packages' {@code package-info.java}.
 */
@AnalyzeClasses(packages = "dev.sparktrainer", importOptions = ImportOption.DoNotIncludeTests.class)
class ArchitectureTest {

  /**
   * The collective (rendezvous, transport, ring algorithms) runs and is tested alone, with N ranks
   * on loopback, and could run where Spark is not: a machine with only a JRE and libtorch.
   */
  @ArchTest
  static final ArchRule collectiveImportsNeitherSparkNorHadoopNorDjl =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.collective..")
          .should()
          .dependOnClassesThat()
          .resideInAnyPackage("org.apache.spark..", "org.apache.hadoop..", "ai.djl..", "scala..")
          .because(
              "the collective layer has no Spark, Hadoop or DJL import (see collective/package-info.java)");

  /** The collective is the bottom layer of the trainer: it knows nothing of what runs on it. */
  @ArchTest
  static final ArchRule collectiveDependsOnNoOtherLayer =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.collective..")
          .should()
          .dependOnClassesThat(
              resideInAPackage("dev.sparktrainer..")
                  .and(resideOutsideOfPackage("dev.sparktrainer.collective..")))
          .because("the collective layer is used by the trainer, never the other way round");

  /** The input pipeline feeds training; it does not know how it is trained. */
  @ArchTest
  static final ArchRule dataDoesNotImportTrain =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.data..")
          .should()
          .dependOnClassesThat()
          .resideInAPackage("dev.sparktrainer.train..")
          .because("the input pipeline (data) sits below the trainer (train)");

  /**
   * The input pipeline makes host batches (direct buffers); turning them into device tensors is the
   * {@code device} package's: no DJL type in {@code data}.
   */
  @ArchTest
  static final ArchRule dataHasNoDeviceCode =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.data..")
          .should()
          .dependOnClassesThat()
          .resideInAPackage("ai.djl..")
          .because(
              "data yields host batches; the device package uploads them (see"
                  + " device/package-info.java)");

  /**
   * How a batch reaches the device (upload, image transfer, prefetch, the split across local
   * replicas) is one package between the input pipeline and the trainer: it uses {@code data} and
   * nothing of the trainer above it.
   */
  @ArchTest
  static final ArchRule deviceSitsBetweenDataAndTheTrainer =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.device..")
          .should()
          .dependOnClassesThat(
              resideInAPackage("dev.sparktrainer..")
                  .and(resideOutsideOfPackage("dev.sparktrainer.device.."))
                  .and(resideOutsideOfPackage("dev.sparktrainer.data.."))
                  .and(resideOutsideOfPackage("dev.sparktrainer.tfrecord..")))
          .because("host batch -> device tensors sits on data and below train, ml and cli");

  /**
   * The elastic policy, the grow request and the relaunch loop sit below the trainer that uses
   * them: nothing in {@code train.elastic} reaches back into the rest of {@code train} (the loop,
   * the facade, their state).
   */
  @ArchTest
  static final ArchRule elasticDependsOnNothingElseInTrain =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.train.elastic..")
          .should()
          .dependOnClassesThat(
              resideInAPackage("dev.sparktrainer.train..")
                  .and(resideOutsideOfPackage("dev.sparktrainer.train.elastic..")))
          .because("train uses train.elastic, never the other way round");

  /** The facade is the top of {@code train}: the classes it drives do not reach back up to it. */
  @ArchTest
  static final ArchRule nothingInTrainDependsOnTheFacade =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.train..")
          .and()
          .haveNameNotMatching("dev\\.sparktrainer\\.train\\.DistributedTrainer(Builder)?(\\$.*)?")
          .should()
          .dependOnClassesThat()
          .haveFullyQualifiedName("dev.sparktrainer.train.DistributedTrainer")
          .because(
              "DistributedTrainer (and its builder) is the facade over the loop and its parts");

  /**
   * Inside the trainer, each package sits on the ones below it and never reaches up: the facade
   * ({@code train}) over the Spark job ({@code train.job}) over the loop ({@code train.loop}) over
   * the configuration ({@code train.config}) over the step, the input and the elastic policy, all
   * over the metrics the loop reports ({@code train.metrics}). Only dependencies between these
   * packages count (the CLI, the Estimator and the monitor use several of them).
   */
  @ArchTest
  static final ArchRule trainPackagesFormLayers =
      layeredArchitecture()
          .consideringOnlyDependenciesInLayers()
          .layer("facade")
          .definedBy("dev.sparktrainer.train")
          .layer("job")
          .definedBy("dev.sparktrainer.train.job..")
          .layer("loop")
          .definedBy("dev.sparktrainer.train.loop..")
          .layer("config")
          .definedBy("dev.sparktrainer.train.config..")
          .layer("step")
          .definedBy("dev.sparktrainer.train.step..")
          .layer("input")
          .definedBy("dev.sparktrainer.train.input..")
          .layer("elastic")
          .definedBy("dev.sparktrainer.train.elastic..")
          .layer("metrics")
          .definedBy("dev.sparktrainer.train.metrics..")
          .whereLayer("facade")
          .mayNotBeAccessedByAnyLayer()
          .whereLayer("job")
          .mayOnlyBeAccessedByLayers("facade")
          .whereLayer("loop")
          .mayOnlyBeAccessedByLayers("job", "facade")
          .whereLayer("config")
          .mayOnlyBeAccessedByLayers("loop", "job", "facade")
          .whereLayer("step")
          .mayOnlyBeAccessedByLayers("config", "loop", "job", "facade")
          .whereLayer("input")
          .mayOnlyBeAccessedByLayers("config", "loop", "job", "facade")
          .whereLayer("elastic")
          .mayOnlyBeAccessedByLayers("config", "loop", "job", "facade")
          .whereLayer("metrics")
          .mayOnlyBeAccessedByLayers("step", "config", "loop", "job", "facade")
          .because("train's packages are layers: see train/package-info.java");

  /**
   * A saved model's completion marker is a file format of its own: it knows nothing of the model it
   * guards ({@code TrainedModel} uses it, never the other way round).
   */
  @ArchTest
  static final ArchRule theModelMarkerKnowsNoModel =
      noClasses()
          .that()
          .haveFullyQualifiedName("dev.sparktrainer.train.ModelMarker")
          .should()
          .dependOnClassesThat()
          .haveFullyQualifiedName("dev.sparktrainer.train.TrainedModel")
          .because("the marker is the save's format, used by TrainedModel");

  /**
   * The same in the source: a compile-time constant such as {@code TrainedModel.MARKER} is inlined
   * by javac, so the bytecode the rule above reads cannot show that dependency.
   */
  @ArchTest
  static void theModelMarkersSourceNamesNoModel(JavaClasses classes) throws IOException {
    String source =
        Files.readString(Path.of("src/main/java/dev/sparktrainer/train/ModelMarker.java"));
    if (source.matches("(?s).*\\bTrainedModel\\b.*")) {
      throw new AssertionError("ModelMarker.java names TrainedModel: the marker owns its name");
    }
  }

  /** The trainer's own packages have no cycle between them either. */
  @ArchTest
  static final ArchRule noCyclesInsideTrain =
      slices().matching("dev.sparktrainer.train.(*)..").should().beFreeOfCycles();

  /**
   * The step and the optimizers never do NDArray arithmetic with a host number ({@code mul(Number)}
   * and its kin): DJL makes that number a tensor by a copy from host memory, and on a GPU libtorch
   * waits for all the queued work before such a copy. Their scalars come from {@link
   * dev.sparktrainer.optim.DeviceScalars} (a fill on the device, nothing waits).
   */
  @ArchTest
  static final ArchRule noHostScalarsOnTheStepPath =
      noClasses()
          .that()
          .resideInAnyPackage("dev.sparktrainer.optim..", "dev.sparktrainer.train.step..")
          .should()
          .callMethodWhere(
              new DescribedPredicate<JavaMethodCall>("NDArray arithmetic with a host Number") {
                @Override
                public boolean test(JavaMethodCall call) {
                  List<JavaClass> params = call.getTarget().getRawParameterTypes();
                  return call.getTargetOwner().isAssignableTo(NDArray.class)
                      && HOST_SCALAR_OPS.contains(call.getName())
                      && params.size() == 1
                      && params.get(0).isEquivalentTo(Number.class);
                }
              })
          .because("a host scalar makes a GPU wait for its queued work: use DeviceScalars");

  private static final Set<String> HOST_SCALAR_OPS =
      Set.of(
          "add", "addi", "sub", "subi", "mul", "muli", "div", "divi", "pow", "powi", "rsub",
          "rsubi", "rdiv", "rdivi", "maximum", "minimum", "mod", "modi", "eq", "neq", "gt", "gte",
          "lt", "lte");

  /** Packages form layers: no package reaches back to one that depends on it, directly or not. */
  @ArchTest
  static final ArchRule noPackageCycles =
      slices().matching("dev.sparktrainer.(*)..").should().beFreeOfCycles();
}
