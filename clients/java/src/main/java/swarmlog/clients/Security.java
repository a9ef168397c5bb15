package swarmlog.clients;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;

/**
 * How the producer reaches and authenticates to the brokers, as kafka-clients properties: each security flag, else
 * its SWARMLOG_KAFKA_* variable, checked as swarmlog/settings.py checks them.
 *
 * @param properties what the producer is configured with (the password only inside sasl.jaas.config)
 * @param secret the password, so that no message shows it; null without one
 * @param describe how we connect, for messages: "SASL_SSL, SCRAM-SHA-512 as producer"
 */
record Security(Properties properties, String secret, String describe) {
    static final List<String> FLAGS =
        List.of("security-protocol", "sasl-mechanism", "username", "password-file", "ca-file", "cert-file", "key-file");
    static final String NO_CHECK_HOSTNAME = "no-check-hostname";
    static final List<String> PROTOCOLS = List.of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL");
    static final List<String> MECHANISMS = List.of("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN");
    static final Map<String, Boolean> BOOLEANS =
        Map.of("true", true, "1", true, "yes", true, "false", false, "0", false, "no", false);

    /** The SWARMLOG_KAFKA_* variable a security flag defaults to. */
    static String variable(String flag) {
        return "SWARMLOG_KAFKA_" + flag.replace('-', '_').toUpperCase(Locale.ROOT);
    }

    static String named(String flag) {
        return "--" + flag + " (" + variable(flag) + ")";
    }

    /** The security of a connection from the flags given (FLAGS and NO_CHECK_HOSTNAME) and the environment. */
    static Security of(Map<String, String> flags, Map<String, String> env) throws Failure {
        String protocol = setting("security-protocol", flags, env, "PLAINTEXT");
        String mechanism = setting("sasl-mechanism", flags, env, "SCRAM-SHA-512");
        String username = setting("username", flags, env, null);
        String ca = setting("ca-file", flags, env, null);
        String cert = setting("cert-file", flags, env, null);
        String key = setting("key-file", flags, env, null);
        String secret = password(flags, env);
        String hostname = env.getOrDefault("SWARMLOG_KAFKA_CHECK_HOSTNAME", "").toLowerCase(Locale.ROOT);
        if (!PROTOCOLS.contains(protocol)) {
            throw Failure.config(named("security-protocol") + " is " + protocol + "; use one of "
                                 + String.join(", ", PROTOCOLS));
        }
        if (!MECHANISMS.contains(mechanism)) {
            throw Failure.config(named("sasl-mechanism") + " is " + mechanism + "; use one of "
                                 + String.join(", ", MECHANISMS));
        }
        if (!hostname.isEmpty() && !BOOLEANS.containsKey(hostname)) {
            throw Failure.config("SWARMLOG_KAFKA_CHECK_HOSTNAME=" + hostname + " is not true or false");
        }
        boolean sasl = protocol.startsWith("SASL_");
        boolean tls = protocol.equals("SSL") || protocol.equals("SASL_SSL");
        if (sasl && (username == null || secret == null)) {
            throw Failure.config("--security-protocol " + protocol + " needs " + named("username") + " and "
                                 + named("password-file") + " (or SWARMLOG_KAFKA_PASSWORD)");
        }
        if ((cert == null) != (key == null)) {
            throw Failure.config("mutual TLS needs both " + named("cert-file") + " and " + named("key-file"));
        }
        if (cert != null && !tls) {
            throw Failure.config(named("cert-file") + " is set but --security-protocol is " + protocol
                                 + "; use SSL (mutual TLS) or SASL_SSL");
        }
        String chain = cert == null ? null : read("cert-file", cert);
        String pkcs8 = key == null ? null : read("key-file", key);
        if (ca != null) read("ca-file", ca); // checked like the others; kafka-clients reads it by its path

        Properties properties = new Properties();
        properties.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, protocol);
        if (sasl) {
            properties.put(SaslConfigs.SASL_MECHANISM, mechanism);
            String module = mechanism.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                                                      : "org.apache.kafka.common.security.scram.ScramLoginModule";
            properties.put(SaslConfigs.SASL_JAAS_CONFIG,
                           module + " required username=" + quoted(username) + " password=" + quoted(secret) + ";");
        }
        if (tls && ca != null) {
            properties.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
            properties.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, ca);
        }
        if (chain != null) {
            // kafka-clients reads a PEM key only as unencrypted PKCS#8; say how to convert any other.
            if (!pkcs8.contains("-----BEGIN PRIVATE KEY-----")) {
                throw Failure.config(named("key-file") + " " + key + " is not an unencrypted PKCS#8 key (-----BEGIN "
                                     + "PRIVATE KEY-----), the only kind kafka-clients reads; convert it with "
                                     + "`openssl pkcs8 -topk8 -nocrypt -in " + key + "`");
            }
            properties.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
            properties.put(SslConfigs.SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG, chain);
            properties.put(SslConfigs.SSL_KEYSTORE_KEY_CONFIG, pkcs8);
        }
        if (flags.containsKey(NO_CHECK_HOSTNAME) || Boolean.FALSE.equals(BOOLEANS.get(hostname))) {
            // The chain is still verified; only the broker's name is not matched against its certificate.
            properties.put(SslConfigs.SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG, "");
        }
        return new Security(properties, secret, sasl ? protocol + ", " + mechanism + " as " + username : protocol);
    }

    /** The flag's value, else its variable's (empty counts as unset), else the default. */
    private static String setting(String flag, Map<String, String> flags, Map<String, String> env, String otherwise) {
        if (flags.containsKey(flag)) return flags.get(flag);
        String value = env.get(variable(flag));
        return value == null || value.isEmpty() ? otherwise : value;
    }

    /** The first line of --password-file or $SWARMLOG_KAFKA_PASSWORD_FILE, else $SWARMLOG_KAFKA_PASSWORD, else null. */
    private static String password(Map<String, String> flags, Map<String, String> env) throws Failure {
        String file = setting("password-file", flags, env, null);
        if (file != null) return read("password-file", file).split("\r?\n|\r", -1)[0];
        String value = env.get("SWARMLOG_KAFKA_PASSWORD");
        return value == null || value.isEmpty() ? null : value;
    }

    /** A setting's file, or a Failure naming its flag and variable. */
    private static String read(String flag, String path) throws Failure {
        try {
            if (Files.isRegularFile(Path.of(path))) return Files.readString(Path.of(path), StandardCharsets.UTF_8);
        } catch (IOException e) {
            // unreadable: said below
        }
        throw Failure.config(named(flag) + " " + path + " is not a readable file");
    }

    /** A JAAS option value: in double quotes, with backslashes and quotes escaped. */
    private static String quoted(String value) {
        return '"' + value.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }

    /** The message with the password, wherever it occurs, as ***. */
    String hide(String message) {
        return secret == null || secret.isEmpty() ? message : message.replace(secret, "***");
    }
}
