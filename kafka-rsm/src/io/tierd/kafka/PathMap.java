package io.tierd.kafka;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The {@code tierd.path.map} setting: rewrites of the broker's file paths into
 * the paths at which the tierd sidecar sees the same files (a sidecar container
 * that mounts the broker's log dir elsewhere). The text is comma-separated
 * {@code brokerPrefix=sidecarPrefix} pairs of absolute paths; a path is
 * rewritten by the longest broker prefix it lies under, compared by whole path
 * components (so {@code /data} does not match {@code /data2/x}); a path under no
 * prefix is sent unchanged.
 */
final class PathMap {
    private static final class Rule {
        final Path from;
        final Path to;

        Rule(Path from, Path to) {
            this.from = from;
            this.to = to;
        }
    }

    /** No rewrites. */
    static final PathMap IDENTITY = new PathMap(Collections.emptyList());

    private final List<Rule> rules;

    private PathMap(List<Rule> rules) {
        this.rules = rules;
    }

    /**
     * @param text comma-separated brokerPrefix=sidecarPrefix pairs; blank for none
     * @return the map
     * @throws IllegalArgumentException naming the bad pair
     */
    static PathMap parse(String text) {
        if (text == null || text.trim().isEmpty()) {
            return IDENTITY;
        }
        List<Rule> rules = new ArrayList<>();
        for (String pair : text.split(",")) {
            String p = pair.trim();
            int eq = p.indexOf('=');
            if (eq <= 0 || eq == p.length() - 1 || p.indexOf('=', eq + 1) >= 0) {
                throw new IllegalArgumentException("\"" + p + "\" is not brokerPrefix=sidecarPrefix");
            }
            Path from = Paths.get(p.substring(0, eq).trim()).normalize();
            Path to = Paths.get(p.substring(eq + 1).trim()).normalize();
            if (!from.isAbsolute() || !to.isAbsolute()) {
                throw new IllegalArgumentException("\"" + p + "\": both prefixes must be absolute paths");
            }
            rules.add(new Rule(from, to));
        }
        return new PathMap(Collections.unmodifiableList(rules));
    }

    /**
     * @param brokerPath a file path as the broker gave it
     * @return the absolute path the sidecar should open
     */
    String apply(Path brokerPath) {
        Path p = brokerPath.toAbsolutePath().normalize();
        Rule best = null;
        for (Rule r : rules) {
            if (p.startsWith(r.from) && (best == null || r.from.getNameCount() > best.from.getNameCount())) {
                best = r;
            }
        }
        if (best == null) {
            return p.toString();
        }
        return best.to.resolve(best.from.relativize(p)).toString();
    }

    /** @return the number of rewrites */
    int size() {
        return rules.size();
    }
}
