// One-off measurement behind docs/benchmarks.md's decoder choice (issue #33): OpenCV's JPEG decoder
// (org.openpnp:opencv, libjpeg-turbo inside), full and DCT-scaled (IMREAD_REDUCED_COLOR_2/4), against
// ImageIO's, one thread, the same photos. Not part of the build (OpenCV is no dependency):
//   mvn -B -ntp dependency:get -Dartifact=org.openpnp:opencv:4.9.0-0
//   java -cp ~/.m2/repository/org/openpnp/opencv/4.9.0-0/opencv-4.9.0-0.jar \
//     bench/scripts/OpenCvDecode.java target/bench/photos 5
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.opencv.core.Mat;
import org.opencv.core.MatOfByte;
import org.opencv.core.Size;
import org.opencv.imgcodecs.Imgcodecs;
import org.opencv.imgproc.Imgproc;

public class OpenCvDecode {
  public static void main(String[] args) throws Exception {
    nu.pattern.OpenCV.loadLocally();
    List<byte[]> photos = new ArrayList<>();
    try (Stream<Path> s = Files.walk(Path.of(args[0]))) {
      for (Path p : s.filter(f -> f.toString().endsWith(".jpg")).sorted().toList()) {
        photos.add(Files.readAllBytes(p));
      }
    }
    double seconds = Double.parseDouble(args[1]);
    for (int round = 0; round < 2; round++) {
      run("imageio-full", photos, seconds, p -> ImageIO.read(new ByteArrayInputStream(p)).getWidth());
      run("opencv-full", photos, seconds, p -> Imgcodecs.imdecode(new MatOfByte(p), Imgcodecs.IMREAD_COLOR).cols());
      run("opencv-reduced2", photos, seconds, p -> Imgcodecs.imdecode(new MatOfByte(p), Imgcodecs.IMREAD_REDUCED_COLOR_2).cols());
      run("opencv-full+resize224", photos, seconds, p -> {
        Mat m = Imgcodecs.imdecode(new MatOfByte(p), Imgcodecs.IMREAD_COLOR);
        Mat o = new Mat();
        Imgproc.resize(m, o, new Size(224, 224), 0, 0, Imgproc.INTER_AREA);
        return o.cols();
      });
    }
  }

  interface Op { int apply(byte[] p) throws Exception; }

  static void run(String name, List<byte[]> photos, double seconds, Op op) throws Exception {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    long n = 0;
    long t0 = System.nanoTime();
    while (System.nanoTime() < end) {
      op.apply(photos.get((int) (n % photos.size())));
      n++;
    }
    double s = (System.nanoTime() - t0) / 1e9;
    System.out.printf("%-24s %8.1f images/s (1 thread)%n", name, n / s);
  }
}
