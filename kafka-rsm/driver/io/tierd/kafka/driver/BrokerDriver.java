package io.tierd.kafka.driver;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CyclicBarrier;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * Plays a broker's RemoteLogManager call order through the tierd plugin on a
 * real partition directory, for tierd's end-to-end tests. Prints one line per
 * check, {@code ok <what>} or {@code FAIL <what>: <why>}, then
 * {@code summary: N ok, M failed}; exits 0 only if every check passed (1 if one
 * failed, 2 for a usage error). See kafka-rsm/README.md for the commands.
 */
public final class BrokerDriver {
    static final String USAGE = String.join("\n",
            "usage: BrokerDriver COMMAND --endpoint URL --token-file F --dir PARTITION_DIR --topic-id ID [options]",
            "commands:",
            "  lifecycle   copy, index cache, reads, epochs, snapshot, delete twice, not-found after, per rolled segment",
            "  concurrent  the lifecycle of distinct copies on --threads threads at once",
            "  copy        one copy: --base N --segment-id ID [--expect ok|retriable|error|not-found] [--expect-message S]",
            "  check       the read checks of a copy present: --base N --segment-id ID [--custom-metadata BASE64]",
            "  delete      one delete: --base N --segment-id ID [--expect ...] [--expect-message S]",
            "  missing     every fetch not found: --base N --segment-id ID",
            "options:",
            "  --all               also the segment with the highest base offset (end offset from a scan of its entries)",
            "  --threads N         threads of concurrent (default 32)",
            "  --set key=value     another plugin setting, rsm.config. prefix stripped (repeatable)",
            "  --broker-id N       broker.id given to configure and put in the metadata (default 1)",
            "  --fetch-bytes N     bytes a read takes before it closes its stream (default 1048576)",
            "  --plugin-jar JAR    load the plugin from JAR child-first, as remote.log.storage.manager.class.path does",
            "  --plugin-class C    the plugin class (default io.tierd.kafka.TierdRemoteStorageManager)");

    private BrokerDriver() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    /**
     * @return the exit code: 0 all checks passed, 1 a check failed, 2 usage error
     */
    static int run(String[] args, PrintStream out, PrintStream err) {
        Args a;
        try {
            a = Args.parse(args);
        } catch (IllegalArgumentException e) {
            err.println("BrokerDriver: " + e.getMessage());
            err.println(USAGE);
            return 2;
        }
        Report rep = new Report(out);
        RemoteStorageManager rsm = null;
        try {
            PartitionDir pd = new PartitionDir(a.dir);
            rsm = PluginLoader.load(a.pluginClass, a.pluginJar, a.settings());
            switch (a.command) {
                case "lifecycle":
                    lifecycle(a, pd, rsm, rep);
                    break;
                case "concurrent":
                    concurrent(a, pd, rsm, rep);
                    break;
                case "copy":
                    copy(a, pd, rsm, rep);
                    break;
                case "check":
                    check(a, pd, rsm, rep);
                    break;
                case "delete":
                    delete(a, pd, rsm, rep);
                    break;
                case "missing":
                    BrokerSegment s = BrokerSegment.of(pd, a.base, nextBase(pd, a.base));
                    new SegmentChecks(rsm, rep, a.fetchBytes, "").missing(s, s.metadata(a.topicId, a.segmentId, a.brokerId), "");
                    break;
                default:
                    throw new IllegalStateException(a.command);
            }
        } catch (Exception e) {
            rep.fail("setup", Report.describe(e));
        } finally {
            if (rsm != null) {
                try {
                    rsm.close();
                } catch (Exception e) {
                    rep.fail("close", Report.describe(e));
                }
            }
        }
        rep.info("summary: " + rep.passed() + " ok, " + rep.failed() + " failed");
        return rep.failed() == 0 ? 0 : 1;
    }

    /** @return the base offset after base in the dir, or -1 when base is the last (its end comes from a scan) */
    static long nextBase(PartitionDir pd, long base) {
        for (long b : pd.bases) {
            if (b > base) {
                return b;
            }
        }
        return -1;
    }

    private static void lifecycle(Args a, PartitionDir pd, RemoteStorageManager rsm, Report rep) throws Exception {
        List<BrokerSegment> segs = BrokerSegment.of(pd, a.all);
        if (segs.isEmpty()) {
            rep.fail("lifecycle " + pd.dir.getFileName(), "no rolled segment (" + pd.bases.size()
                    + " .log file(s); add --all to include the last)");
            return;
        }
        for (BrokerSegment s : segs) {
            oneLifecycle(a, s, rsm, new SegmentChecks(rsm, rep, a.fetchBytes, ""), Uuid.randomUuid());
        }
        rep.ok("lifecycle " + pd.dir.getFileName() + " " + segs.size() + " segment(s)");
    }

    private static void oneLifecycle(Args a, BrokerSegment s, RemoteStorageManager rsm, SegmentChecks c, Uuid id)
            throws Exception {
        RemoteLogSegmentMetadata started = s.metadata(a.topicId, id, a.brokerId);
        ByteBuffer epochs = s.epochCheckpoint();
        RemoteLogSegmentMetadata m = c.copy(s, started, epochs);
        if (m == null) {
            c.deleteFailedAttempt(s, started);
            return;
        }
        c.indexCache(s, m);
        c.reads(s, m);
        c.auxState(s, m, epochs);
        c.deleteTwiceThenMissing(s, m);
    }

    private static void concurrent(Args a, PartitionDir pd, RemoteStorageManager rsm, Report rep) throws Exception {
        List<BrokerSegment> segs = BrokerSegment.of(pd, a.all);
        if (segs.isEmpty()) {
            rep.fail("concurrent " + pd.dir.getFileName(), "no rolled segment (add --all to include the last)");
            return;
        }
        CyclicBarrier start = new CyclicBarrier(a.threads);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < a.threads; i++) {
            BrokerSegment s = segs.get(i % segs.size());
            String tag = String.format("[t%02d] ", i);
            Thread t = new Thread(() -> {
                try {
                    start.await();
                    oneLifecycle(a, s, rsm, new SegmentChecks(rsm, rep, a.fetchBytes, tag), Uuid.randomUuid());
                } catch (Exception e) {
                    rep.fail(tag + "lifecycle " + s.name(), Report.describe(e));
                }
            }, "driver-" + i);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        rep.ok("concurrent " + pd.dir.getFileName() + " " + a.threads + " threads");
    }

    private static void copy(Args a, PartitionDir pd, RemoteStorageManager rsm, Report rep) throws Exception {
        BrokerSegment s = BrokerSegment.of(pd, a.base, nextBase(pd, a.base));
        RemoteLogSegmentMetadata m = s.metadata(a.topicId, a.segmentId, a.brokerId);
        Throwable err = null;
        try {
            Optional<CustomMetadata> cm = rsm.copyLogSegmentData(m, s.data(s.epochCheckpoint()));
            rep.info("copied " + cm.map(c -> Base64.getEncoder().encodeToString(c.value())).orElse("-"));
        } catch (Exception e) {
            err = e;
            rep.info("exception " + Report.describe(e));
        }
        expect(a, rep, "copy " + s.name(), err);
    }

    private static void delete(Args a, PartitionDir pd, RemoteStorageManager rsm, Report rep) throws Exception {
        BrokerSegment s = BrokerSegment.of(pd, a.base, nextBase(pd, a.base));
        Throwable err = null;
        try {
            rsm.deleteLogSegmentData(s.metadata(a.topicId, a.segmentId, a.brokerId));
            rep.info("deleted");
        } catch (Exception e) {
            err = e;
            rep.info("exception " + Report.describe(e));
        }
        expect(a, rep, "delete " + s.name(), err);
    }

    private static void check(Args a, PartitionDir pd, RemoteStorageManager rsm, Report rep) throws Exception {
        BrokerSegment s = BrokerSegment.of(pd, a.base, nextBase(pd, a.base));
        RemoteLogSegmentMetadata m = s.metadata(a.topicId, a.segmentId, a.brokerId);
        if (a.customMetadata != null) {
            m = BrokerSegment.finished(m, Optional.of(new CustomMetadata(Base64.getDecoder().decode(a.customMetadata))));
        }
        SegmentChecks c = new SegmentChecks(rsm, rep, a.fetchBytes, "");
        c.indexCache(s, m);
        c.reads(s, m);
        c.auxState(s, m, s.epochCheckpoint());
    }

    /** @return "ok", "not-found", "retriable", "error" (another RemoteStorageException) or "unexpected" */
    static String classify(Throwable t) {
        if (t == null) {
            return "ok";
        }
        if (t instanceof RemoteResourceNotFoundException) {
            return "not-found";
        }
        for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getSimpleName().equals("RetriableRemoteStorageException")) {
                return "retriable";
            }
        }
        return t instanceof RemoteStorageException ? "error" : "unexpected";
    }

    /** @return whether the class path has Kafka's RetriableRemoteStorageException (4.2+) */
    static boolean retriableOnClassPath() {
        try {
            Class.forName("org.apache.kafka.server.log.remote.storage.RetriableRemoteStorageException", false,
                    RemoteStorageException.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private static void expect(Args a, Report rep, String what, Throwable err) {
        String got = classify(err);
        String want = a.expect;
        boolean match = got.equals(want);
        String note = "";
        if (!match && want.equals("retriable") && got.equals("error") && !retriableOnClassPath()) {
            match = true;
            note = " (no RetriableRemoteStorageException on this class path: a plain RemoteStorageException)";
        }
        String name = what + " expecting " + want;
        if (match && a.expectMessage != null && (err == null || err.getMessage() == null
                || !err.getMessage().contains(a.expectMessage))) {
            rep.fail(name, "expected a message with \"" + a.expectMessage + "\", got "
                    + (err == null ? "no error" : Report.describe(err)));
            return;
        }
        rep.check(match, name + note, "got " + got + (err == null ? "" : " (" + Report.describe(err) + ")"));
    }

    /** The command line. */
    static final class Args {
        String command;
        String endpoint;
        String tokenFile;
        Path dir;
        Uuid topicId;
        boolean all;
        int threads = 32;
        int brokerId = 1;
        int fetchBytes = 1 << 20;
        long base = -1;
        Uuid segmentId;
        String expect = "ok";
        String expectMessage;
        String customMetadata;
        Path pluginJar;
        String pluginClass = "io.tierd.kafka.TierdRemoteStorageManager";
        final Map<String, String> set = new HashMap<>();

        /** @return the map configure gets: the stripped settings and broker.id as an Integer */
        Map<String, Object> settings() {
            Map<String, Object> m = new HashMap<>(set);
            m.put("tierd.endpoint", endpoint);
            m.put("tierd.token.file", tokenFile);
            m.put("broker.id", brokerId);
            return m;
        }

        static Args parse(String[] args) {
            if (args.length == 0) {
                throw new IllegalArgumentException("no command");
            }
            Args a = new Args();
            a.command = args[0];
            List<String> cmds = List.of("lifecycle", "concurrent", "copy", "check", "delete", "missing");
            if (!cmds.contains(a.command)) {
                throw new IllegalArgumentException("unknown command " + a.command);
            }
            for (int i = 1; i < args.length; i++) {
                String k = args[i];
                if (k.equals("--all")) {
                    a.all = true;
                    continue;
                }
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(k + " needs a value");
                }
                String v = args[++i];
                switch (k) {
                    case "--endpoint": a.endpoint = v; break;
                    case "--token-file": a.tokenFile = v; break;
                    case "--dir": a.dir = Paths.get(v); break;
                    case "--topic-id": a.topicId = uuid(k, v); break;
                    case "--threads": a.threads = positive(k, v); break;
                    case "--broker-id": a.brokerId = integer(k, v); break;
                    case "--fetch-bytes": a.fetchBytes = positive(k, v); break;
                    case "--base": a.base = offset(k, v); break;
                    case "--segment-id": a.segmentId = uuid(k, v); break;
                    case "--custom-metadata": a.customMetadata = v; break;
                    case "--expect-message": a.expectMessage = v; break;
                    case "--plugin-jar": a.pluginJar = Paths.get(v); break;
                    case "--plugin-class": a.pluginClass = v; break;
                    case "--expect":
                        if (!List.of("ok", "retriable", "error", "not-found").contains(v)) {
                            throw new IllegalArgumentException("--expect " + v + ": one of ok, retriable, error, not-found");
                        }
                        a.expect = v;
                        break;
                    case "--set":
                        int eq = v.indexOf('=');
                        if (eq <= 0) {
                            throw new IllegalArgumentException("--set " + v + ": not key=value");
                        }
                        a.set.put(v.substring(0, eq), v.substring(eq + 1));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown option " + k);
                }
            }
            for (String[] req : new String[][] {{"--endpoint", a.endpoint}, {"--token-file", a.tokenFile},
                {"--dir", a.dir == null ? null : "x"}, {"--topic-id", a.topicId == null ? null : "x"}}) {
                if (req[1] == null) {
                    throw new IllegalArgumentException(req[0] + " is required");
                }
            }
            boolean single = !a.command.equals("lifecycle") && !a.command.equals("concurrent");
            if (single && (a.base < 0 || a.segmentId == null)) {
                throw new IllegalArgumentException(a.command + " needs --base and --segment-id");
            }
            return a;
        }

        private static Uuid uuid(String k, String v) {
            try {
                return Uuid.fromString(v);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(k + " " + v + ": not a Kafka Uuid (22 characters of URL-safe base64)");
            }
        }

        private static int integer(String k, String v) {
            try {
                return Integer.parseInt(v);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(k + " " + v + ": not a whole number");
            }
        }

        private static long offset(String k, String v) {
            try {
                long n = Long.parseLong(v);
                if (n >= 0) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // Reported below.
            }
            throw new IllegalArgumentException(k + " " + v + ": not an offset (a whole number, 0 or more)");
        }

        private static int positive(String k, String v) {
            int n = integer(k, v);
            if (n < 1) {
                throw new IllegalArgumentException(k + " " + v + ": out of range");
            }
            return n;
        }
    }
}
