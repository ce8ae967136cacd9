package io.tierd.kafka.driver;

import java.io.PrintStream;

/**
 * The driver's output: one line per check, {@code ok <what>} or
 * {@code FAIL <what>: <why>}, and other lines ({@code copied ...},
 * {@code exception ...}) that are not checks. {@code <what>} never holds ": ".
 * Thread-safe; lines are never interleaved.
 */
final class Report {
    private final PrintStream out;
    private int passed;
    private int failed;

    Report(PrintStream out) {
        this.out = out;
    }

    synchronized void ok(String what) {
        passed++;
        out.println("ok " + what);
        out.flush();
    }

    synchronized void fail(String what, String why) {
        failed++;
        out.println("FAIL " + what + ": " + oneLine(why));
        out.flush();
    }

    /**
     * A check: ok if cond, else FAIL with why.
     *
     * @return cond
     */
    boolean check(boolean cond, String what, String why) {
        if (cond) {
            ok(what);
        } else {
            fail(what, why);
        }
        return cond;
    }

    /** Prints a line that is not a check. */
    synchronized void info(String line) {
        out.println(oneLine(line));
        out.flush();
    }

    synchronized int failed() {
        return failed;
    }

    synchronized int passed() {
        return passed;
    }

    static String oneLine(String s) {
        return s == null ? "null" : s.replace('\n', ' ').replace('\r', ' ');
    }

    /** @return "Class: message" of a throwable, on one line */
    static String describe(Throwable t) {
        return t.getClass().getName() + ": " + oneLine(t.getMessage());
    }
}
