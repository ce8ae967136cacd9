package io.tierd.kafka;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;

/**
 * A body handler that reads an answer whole into memory, but at most a bound:
 * an answer that announces more (Content-Length) is refused before its body is
 * read, and one that goes on past the bound is cut there (the connection is
 * then closed). So a tierd that answers more than it was asked, or anything
 * else on its port that sends without end, costs the broker at most the bound
 * of memory, never its heap. The bound is the call's for a success (2xx), and
 * {@link #ERROR_BYTES} for any other answer (tierd's error JSON is small).
 */
final class BoundedBody {
    /** Largest answer that is not a success, bytes. */
    static final int ERROR_BYTES = 1 << 20;

    private BoundedBody() {
    }

    /**
     * @param successBytes the largest 2xx body, bytes (at most what a byte array holds)
     * @return the handler
     */
    static HttpResponse.BodyHandler<byte[]> upTo(long successBytes) {
        return info -> {
            long max = info.statusCode() / 100 == 2 ? successBytes : ERROR_BYTES;
            return new Subscriber(max, info.headers().firstValueAsLong("Content-Length").orElse(-1));
        };
    }

    private static final class Subscriber implements HttpResponse.BodySubscriber<byte[]> {
        private final long max;
        private final long announced;
        private final CompletableFuture<byte[]> result = new CompletableFuture<>();
        private final ByteArrayOutputStream buf;
        private Flow.Subscription subscription;
        private long n;

        Subscriber(long max, long announced) {
            this.max = max;
            this.announced = announced;
            this.buf = new ByteArrayOutputStream((int) Math.max(0, Math.min(announced >= 0 ? announced : 8192, Math.min(max, 1 << 24))));
        }

        private IOException tooLarge(String what) {
            return new IOException("tierd's answer " + what + " more than the " + max + " bytes this call takes; not read");
        }

        @Override
        public CompletionStage<byte[]> getBody() {
            return result;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            subscription = s;
            if (announced > max) {
                s.cancel();
                result.completeExceptionally(tooLarge("announces " + announced + " bytes,"));
                return;
            }
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(List<ByteBuffer> items) {
            if (result.isDone()) {
                return;
            }
            for (ByteBuffer b : items) {
                n += b.remaining();
                if (n > max) {
                    subscription.cancel();
                    result.completeExceptionally(tooLarge("holds"));
                    return;
                }
                byte[] a = new byte[b.remaining()];
                b.get(a);
                buf.write(a, 0, a.length);
            }
        }

        @Override
        public void onError(Throwable t) {
            result.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            result.complete(buf.toByteArray());
        }
    }
}
