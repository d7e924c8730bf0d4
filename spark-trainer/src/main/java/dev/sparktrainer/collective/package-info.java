/**
 * Collective communication for synchronous data-parallel training: rendezvous, an authenticated TCP
 * ring between N ranks, and the collectives the trainer needs (all-reduce, broadcast, all-gather,
 * barrier).
 *
 * <p>This package has no Spark and no DJL import on purpose: the trainer's barrier tasks only glue
 * it to {@code BarrierTaskContext.allGather}, and it is tested alone with N ranks on loopback.
 *
 * <h2>Use</h2>
 *
 * <pre>{@code
 * JobSecret secret = JobSecret.generate();                  // on the driver, shipped to tasks
 * try (RingListener listener = RingListener.bind(executorHost)) {
 *   List<String> peers = allGather(listener.address());     // e.g. BarrierTaskContext.allGather
 *   try (Communicator comm = Communicator.builder()
 *       .setRank(rank).setPeers(peers).setSecret(secret).setListener(listener)
 *       .optOperationTimeout(Duration.ofMinutes(2))
 *       .build()) {
 *     comm.allReduce(gradients, ReduceOp.MEAN);
 *   }
 * }
 * }</pre>
 *
 * <h2>Design</h2>
 *
 * <ul>
 *   <li>{@link dev.sparktrainer.collective.RingListener} binds the advertised address (not every
 *       interface unless asked) on an ephemeral port; {@link
 *       dev.sparktrainer.collective.Communicator} connects to its right neighbour and accepts its
 *       left neighbour, each connection authenticated by an HMAC-SHA256 challenge-response over the
 *       job secret (nonce from each side), optionally inside TLS (then the proofs are bound to the
 *       TLS connection's certificates, so a relay cannot splice two TLS connections). Strangers
 *       cannot hold the door: silent connections are dropped after a second without costing a
 *       thread, and up to four callers are authenticated at once.
 *   <li>Transport: right after the handshake the two ends of a link agree (both always take part)
 *       on whether the data goes through shared memory: only for plain links to a peer on this
 *       host, with both ends allowing it and the peer able to open the owner-only file the
 *       connecting side created in {@code /dev/shm} and find its nonce in it ({@code
 *       ShmNegotiation}); the peer opens only files of this code's name pattern in its own segment
 *       directory, and segments of processes killed mid-negotiation are swept by the next set-up on
 *       the host. A {@code ShmLink} holds two single-producer single-consumer byte rings in that
 *       mapping and keeps the TCP connection for doorbells (wake-ups of a side sleeping in its
 *       selector) and for noticing the peer's death; frames and algorithms are the same over either
 *       transport.
 *   <li>Large all-reduce: ring reduce-scatter then ring all-gather, in chunks. Each segment is
 *       reduced once, in a fixed order, by the rank that owns it, then copied verbatim: every rank
 *       ends bit-identical. The reduction kernels copy blocks into primitive arrays, where the JIT
 *       vectorizes them.
 *   <li>Small all-reduce (below a threshold): every rank's whole vector travels the ring once and
 *       each rank reduces the N vectors in rank order 0..N-1 (N-1 hops instead of 2(N-1)).
 *   <li>Who writes: on plain TCP links, operations up to a few MB run on the caller's thread alone,
 *       which writes queued frames to the right neighbour whenever it would otherwise wait for the
 *       left one (non-blocking sockets, one selector; no thread hand-off per frame, and small
 *       frames are polled for briefly before blocking). Larger operations, and every operation over
 *       TLS, hand the writing to a sender thread, so that copying and reducing run in parallel; so
 *       do operations over shared-memory links, whose copies are cheap and whose waits poll
 *       briefly.
 *   <li>Every frame carries a header (magic, version, job id, sequence number, operation tag,
 *       payload length) that the receiver checks before it trusts the payload.
 *   <li>Every blocking call has a deadline; a failure names this rank, the peer rank and address
 *       and the operation, and breaks the communicator (closing its sockets so peers fail fast
 *       too).
 * </ul>
 *
 * <h2>Where things are</h2>
 *
 * <p>As in Gloo, one concern per file: {@code Communicator} is the API (argument checks, one
 * operation at a time, deadlines, every failure turned into one {@code CollectiveException});
 * {@code RingConnector} and {@code RingAcceptor} form the ring from a validated {@code RingConfig}
 * ({@code Handshake}, {@code ShmNegotiation}); {@code FrameChannel} sends, receives and checks
 * frames ({@code Wire}, {@code Sender}) over a {@code Link} ({@code ChannelLink}, {@code TlsLink},
 * {@code ShmLink}); each algorithm is one class against a {@code RingContext}: {@code
 * RingAllReduce}, {@code SmallAllReduce}, {@code RingBroadcast}, {@code RingAllGather}, {@code
 * RingBarrier}, with the kernels in {@code Reductions} and {@code HalfFloats}. The package's
 * layering (no Spark, Hadoop or DJL, no other package of the project) is checked by {@code
 * ArchitectureTest}.
 */
package dev.sparktrainer.collective;
