package dev.sparktrainer.tfrecord;

import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideOutsideOfPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/**
 * The data source stands alone: a Spark user reads and writes TFRecords with this module without
 * the trainer. Checked on the compiled classes (Java and Scala) every time the tests run; the
 * module's build also bans a dependency on {@code spark-trainer} (maven-enforcer-plugin).
 */
@AnalyzeClasses(packages = "dev.sparktrainer", importOptions = ImportOption.DoNotIncludeTests.class)
class ArchitectureTest {

  @ArchTest
  static final ArchRule referencesNothingOfTheTrainer =
      noClasses()
          .that()
          .resideInAPackage("dev.sparktrainer.tfrecord..")
          .should()
          .dependOnClassesThat(
              resideInAPackage("dev.sparktrainer..")
                  .and(resideOutsideOfPackage("dev.sparktrainer.tfrecord..")))
          .because(
              "tfrecord-datasource does not depend on spark-trainer (the trainer depends on it)");

  /** codec, example, spark: no package reaches back to one that depends on it. */
  @ArchTest
  static final ArchRule noPackageCycles =
      slices().matching("dev.sparktrainer.tfrecord.(*)..").should().beFreeOfCycles();
}
