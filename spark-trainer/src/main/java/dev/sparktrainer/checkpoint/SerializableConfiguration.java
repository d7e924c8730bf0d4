package dev.sparktrainer.checkpoint;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

/** A Hadoop {@link Configuration} that can be shipped to tasks (broadcast it once per job). */
public final class SerializableConfiguration implements Serializable {
  private static final long serialVersionUID = 1L;
  private transient Configuration conf;

  /** Wraps {@code conf} (not copied). */
  public SerializableConfiguration(Configuration conf) {
    this.conf = conf;
  }

  /** The configuration. */
  public Configuration get() {
    return conf;
  }

  private void writeObject(ObjectOutputStream out) throws IOException {
    out.defaultWriteObject();
    conf.write(out);
  }

  private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
    in.defaultReadObject();
    conf = new Configuration(false);
    conf.readFields(in);
  }
}
