package io.tierd.kafka.driver;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.Map;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * Makes the plugin as the broker does (RemoteLogManager.createRemoteStorageManager
 * and configureRSM): the class by name, from the plugin jar through a child-first
 * class loader when one is named (remote.log.storage.manager.class.path), its
 * no-argument constructor, then configure with the stripped rsm.config.* keys
 * plus broker.id as an Integer.
 */
final class PluginLoader {
    private PluginLoader() {
    }

    /**
     * @param className the plugin's class
     * @param jar the plugin jar to load child-first, or null for the class path
     * @param settings the stripped settings, broker.id included
     * @return the configured plugin
     * @throws ReflectiveOperationException when the class cannot be made
     * @throws ClassCastException when it is not the broker's RemoteStorageManager (a jar that bundles Kafka's types)
     */
    static RemoteStorageManager load(String className, Path jar, Map<String, Object> settings)
            throws ReflectiveOperationException, IOException {
        ClassLoader parent = PluginLoader.class.getClassLoader();
        ClassLoader cl = jar == null ? parent : new ChildFirst(new URL[] {jar.toUri().toURL()}, parent);
        Object o = Class.forName(className, true, cl).getDeclaredConstructor().newInstance();
        RemoteStorageManager rsm = (RemoteStorageManager) o;
        rsm.configure(settings);
        return rsm;
    }

    /** Looks in its own jar first for every class, as Kafka's ChildFirstClassLoader does. */
    private static final class ChildFirst extends URLClassLoader {
        static {
            ClassLoader.registerAsParallelCapable();
        }

        ChildFirst(URL[] urls, ClassLoader parent) {
            super(urls, parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    try {
                        c = findClass(name);
                    } catch (ClassNotFoundException e) {
                        c = super.loadClass(name, false);
                    }
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }
    }
}
