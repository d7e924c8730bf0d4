package dev.sparktrainer.ml;

import dev.sparktrainer.data.ExampleTransform;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.ObjectStreamClass;
import java.util.Base64;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.util.Identifiable;

/**
 * A Spark ML parameter holding an {@link ExampleTransform}. Spark ML's own {@code Param} cannot
 * write a function as JSON; this one writes its Java serialization (Base64 in a JSON string), so an
 * Estimator with a transform can still be saved — and loaded where the transform's classes are on
 * the class path.
 */
final class TransformParam extends Param<ExampleTransform> {
  private static final long serialVersionUID = 1L;

  TransformParam(Identifiable parent, String name, String doc) {
    super(parent, name, doc);
  }

  @Override
  public String jsonEncode(ExampleTransform value) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(value);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "Cannot save " + name() + ": the transform is not serializable: " + e, e);
    }
    return "\"" + Base64.getEncoder().encodeToString(bytes.toByteArray()) + "\"";
  }

  @Override
  public ExampleTransform jsonDecode(String json) {
    String s = json.trim();
    if (s.length() < 2 || s.charAt(0) != '"' || s.charAt(s.length() - 1) != '"') {
      throw new IllegalArgumentException(
          "Invalid " + name() + ": expected a JSON string, got " + json);
    }
    byte[] bytes = Base64.getDecoder().decode(s.substring(1, s.length() - 1));
    try (ObjectInputStream in =
        new ObjectInputStream(new ByteArrayInputStream(bytes)) {
          @Override
          protected Class<?> resolveClass(ObjectStreamClass desc)
              throws IOException, ClassNotFoundException {
            // The caller's class loader (a notebook's, Spark's) knows the user's classes.
            return Class.forName(
                desc.getName(), false, Thread.currentThread().getContextClassLoader());
          }
        }) {
      return (ExampleTransform) in.readObject();
    } catch (IOException | ClassNotFoundException | ClassCastException e) {
      throw new IllegalArgumentException("Cannot load " + name() + ": " + e, e);
    }
  }
}
