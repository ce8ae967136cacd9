package io.tierd.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/** The TLS trust of an https endpoint: the CAs of a PEM file ({@code tierd.tls.ca.file}). */
final class TlsTrust {
    private TlsTrust() {
    }

    /**
     * @param pem a file of one or more PEM ("BEGIN CERTIFICATE") X.509 certificates
     * @return a TLS context that trusts exactly those certificates (host names still checked)
     * @throws IllegalArgumentException naming the file when it holds no usable certificate
     */
    static SSLContext fromPem(Path pem) {
        try (InputStream in = Files.newInputStream(pem)) {
            Collection<? extends Certificate> certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
            if (certs.isEmpty()) {
                throw new IllegalArgumentException(Settings.TLS_CA_FILE + ": " + pem + " holds no certificate");
            }
            KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
            ks.load(null, null);
            int i = 0;
            for (Certificate c : certs) {
                ks.setCertificateEntry("ca-" + i++, c);
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(ks);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            return ctx;
        } catch (IOException | GeneralSecurityException e) {
            throw new IllegalArgumentException(Settings.TLS_CA_FILE + ": " + pem + " is not a PEM certificate file: " + e, e);
        }
    }
}
