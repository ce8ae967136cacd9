package io.tierd.kafka;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.Objects;

/**
 * The bearer token of {@code tierd.token.file}: the file's one line, surrounding
 * whitespace ignored (rsmapi/doc.go). The file is read again whenever its
 * modification time, size or inode changes, so a token can be rotated by
 * rewriting or renaming over the file; if the file cannot be read after a good
 * read, the last good token is kept. No message of this class ever holds the
 * token or any part of the file.
 */
final class TokenFile {
    private final Path path;
    private String token;
    private FileTime mtime;
    private long size = -1;
    private Object fileKey;

    /**
     * Reads the token once.
     *
     * @param path the token file
     * @throws IllegalArgumentException if the file is unreadable or holds no usable token
     */
    TokenFile(Path path) {
        this.path = path;
        try {
            reload();
        } catch (IOException e) {
            throw new IllegalArgumentException(e.getMessage(), e);
        }
    }

    /** @return the file's path */
    Path path() {
        return path;
    }

    /**
     * @return the current token, re-read if the file changed
     */
    synchronized String current() {
        try {
            BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class);
            if (a.size() != size || !a.lastModifiedTime().equals(mtime) || !Objects.equals(a.fileKey(), fileKey)) {
                reload();
            }
        } catch (IOException e) {
            // Keep the last good token: a rotation may be renaming over the file right now.
        }
        return token;
    }

    /**
     * Reads the file now, whatever its attributes say.
     *
     * @return the token
     * @throws IOException if the file is unreadable or holds no usable token (the message never shows its content)
     */
    synchronized String reload() throws IOException {
        BasicFileAttributes a;
        byte[] raw;
        try {
            a = Files.readAttributes(path, BasicFileAttributes.class);
            raw = Files.readAllBytes(path);
        } catch (IOException e) {
            throw new IOException("token file " + path + " cannot be read (" + e.getClass().getSimpleName() + ")", e);
        }
        String t = new String(raw, StandardCharsets.UTF_8).trim();
        if (t.isEmpty()) {
            throw new IOException("token file " + path + " is empty");
        }
        for (int i = 0; i < t.length(); i++) {
            char c = t.charAt(i);
            if (c == '\n' || c == '\r') {
                throw new IOException("token file " + path + " holds more than one line");
            }
            if (c < 0x21 || c > 0x7e) {
                throw new IOException("token file " + path + " holds a character that cannot be sent in an HTTP header"
                        + " (only visible ASCII is allowed)");
            }
        }
        token = t;
        mtime = a.lastModifiedTime();
        size = a.size();
        fileKey = a.fileKey();
        return t;
    }
}
