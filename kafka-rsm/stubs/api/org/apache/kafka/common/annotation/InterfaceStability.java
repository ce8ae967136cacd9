package org.apache.kafka.common.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;

/**
 * Compile-only stand-in of Kafka's {@code InterfaceStability} annotations.
 */
public class InterfaceStability {
    private InterfaceStability() {
    }

    /** Compatibility kept across minor releases. */
    @Documented
    @Retention(RetentionPolicy.RUNTIME)
    public @interface Stable { }

    /** May change at a minor release. */
    @Documented
    @Retention(RetentionPolicy.RUNTIME)
    public @interface Evolving { }

    /** No guarantee at all. */
    @Documented
    @Retention(RetentionPolicy.RUNTIME)
    public @interface Unstable { }
}
