package io.tierd.kafka;

/** Package-private parts of the plugin and its tests, for the driver's tests in another package. */
public final class TestAccess {
    private TestAccess() {
    }

    /** @return the plugin's JSON reader's value of text */
    public static Object parseJson(String text) {
        return Json.parse(text);
    }

    /** @return whether this run's class path has RetriableRemoteStorageException */
    public static boolean retriableExpected() {
        return ErrorMappingTest.expectRetriable();
    }
}
