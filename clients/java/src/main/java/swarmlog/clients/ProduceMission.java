package swarmlog.clients;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.stream.Stream;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Submits one swarmlog mission: a MissionSubmitted in Avro single-object encoding on swarm.missions, key mission_id. */
public final class ProduceMission {
    static final String TOPIC = "swarm.missions";
    static final String USAGE = """
        usage: java -jar produce-mission.jar --task ID=PROMPT [--task ...] [--capability CAP ...]
               [--title TEXT] [--region NAME] [--mission-id ID] [--bootstrap HOST:PORT] [--schemas DIR]
               [--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL] [--sasl-mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN]
               [--username NAME] [--password-file FILE] [--ca-file PEM] [--cert-file PEM --key-file PEM] [--no-check-hostname]
        Prints the mission id. --bootstrap defaults to $SWARMLOG_BOOTSTRAP, then localhost:9092;
        --schemas to the repository's schemas/ folder (the latest MissionSubmitted/vN.avsc is used).
        Each security flag defaults to its SWARMLOG_KAFKA_* variable (--password-file: SWARMLOG_KAFKA_PASSWORD_FILE,
        then SWARMLOG_KAFKA_PASSWORD); docs/producing-missions.md lists them. Exit status: 2 usage, 3 configuration,
        4 the brokers cannot be reached or refuse the credentials or certificates.""";

    /** The command line, parsed. */
    record Options(String bootstrap, Path schemas, String missionId, String title, String region,
                   List<String[]> tasks, List<String> capabilities, Map<String, String> security) {

        static Options parse(String[] args) throws URISyntaxException {
            String bootstrap = System.getenv().getOrDefault("SWARMLOG_BOOTSTRAP", "localhost:9092");
            Path schemas = defaultSchemas();
            String missionId = "m-" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
            String title = null;
            String region = null;
            List<String[]> tasks = new ArrayList<>();
            List<String> capabilities = new ArrayList<>();
            Map<String, String> security = new HashMap<>();
            Iterator<String> words = List.of(args).iterator();
            while (words.hasNext()) {
                String option = words.next();
                switch (option) {
                    case "--bootstrap" -> bootstrap = value(option, words);
                    case "--schemas" -> schemas = Path.of(value(option, words));
                    case "--mission-id" -> missionId = value(option, words);
                    case "--title" -> title = value(option, words);
                    case "--region" -> region = value(option, words);
                    case "--capability" -> capabilities.add(value(option, words));
                    case "--no-check-hostname" -> security.put(Security.NO_CHECK_HOSTNAME, "true");
                    case "--task" -> {
                        String[] idPrompt = value(option, words).split("=", 2);
                        if (idPrompt.length != 2) throw new IllegalArgumentException("--task wants ID=PROMPT");
                        tasks.add(idPrompt);
                    }
                    default -> {
                        if (!option.startsWith("--") || !Security.FLAGS.contains(option.substring(2))) {
                            throw new IllegalArgumentException("unknown option " + option);
                        }
                        security.put(option.substring(2), value(option, words));
                    }
                }
            }
            if (tasks.isEmpty()) throw new IllegalArgumentException("a mission needs at least one --task ID=PROMPT");
            return new Options(bootstrap, schemas, missionId, title == null ? missionId : title, region, tasks,
                               capabilities, security);
        }

        private static String value(String option, Iterator<String> words) {
            if (!words.hasNext()) throw new IllegalArgumentException(option + " needs a value");
            return words.next();
        }

        /** The schemas/ folder of the repository this jar was built in (clients/java/target/produce-mission.jar). */
        private static Path defaultSchemas() throws URISyntaxException {
            Path jar = Path.of(ProduceMission.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            return jar.getParent().resolve("../../../schemas").normalize();
        }
    }

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage() + "\n" + USAGE);
            System.exit(2);
            return;
        }
        try {
            produce(options, Security.of(options.security(), System.getenv()));
        } catch (Failure e) {
            System.err.println("produce-mission: " + e.getMessage());
            System.exit(e.status);
        }
    }

    /** Encodes the mission, sends it and waits for the brokers' acknowledgement; prints the mission id. */
    static void produce(Options options, Security security) throws Exception {
        Schema schema = new Schema.Parser().parse(latestSchema(options.schemas()).toFile());
        // Avro's own single-object encoder: C3 01, the schema's CRC-64-AVRO fingerprint, the binary body.
        BinaryMessageEncoder<GenericRecord> encoder = new BinaryMessageEncoder<>(GenericData.get(), schema);
        ByteBuffer framed = encoder.encode(mission(schema, options));
        byte[] value = new byte[framed.remaining()];
        framed.get(value);

        Properties config = new Properties();
        config.putAll(security.properties());
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrap());
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "swarmlog-produce-mission-java");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        String at = "Kafka at " + options.bootstrap() + " (" + security.describe() + ")";
        KafkaProducer<String, byte[]> producer;
        try {
            producer = new KafkaProducer<>(config, new StringSerializer(), new ByteArraySerializer());
        } catch (KafkaException e) {
            throw Failure.config(security.hide("cannot configure a producer for " + at + ": " + causes(e)));
        }
        try (producer) {
            producer.send(new ProducerRecord<>(TOPIC, options.missionId(), value)).get();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            String why = security.hide(causes(cause));
            // A wrong password is a SaslAuthenticationException; an untrusted certificate an SslAuthenticationException.
            if (cause instanceof SaslAuthenticationException) {
                throw Failure.service("authentication failed at " + at + ": " + why);
            }
            if (cause instanceof AuthenticationException || cause instanceof TimeoutException) {
                throw Failure.service("cannot connect to " + at + ": " + why);
            }
            if (cause instanceof AuthorizationException) throw Failure.service(at + " refused: " + why);
            throw Failure.failed(why);
        }
        System.err.println("fingerprint " + HexFormat.of().formatHex(value, 2, 10) + ", " + value.length + " bytes");
        System.out.println(options.missionId());
    }

    /** An exception and its causes' messages on one line: "SSL handshake failed: PKIX path building failed: ...". */
    static String causes(Throwable error) {
        List<String> messages = new ArrayList<>();
        for (Throwable e = error; e != null; e = e.getCause()) {
            String message = e.getMessage() == null ? null : e.getMessage().replaceAll("\\s+", " ").strip();
            if (message != null && messages.stream().noneMatch(m -> m.contains(message))) messages.add(message);
        }
        return String.join(": ", messages);
    }

    /** The MissionSubmitted record; fields not set here take their schema defaults. */
    static GenericRecord mission(Schema schema, Options options) {
        Schema taskSchema = schema.getField("tasks").schema().getElementType();
        List<GenericRecord> tasks = new ArrayList<>();
        for (String[] idPrompt : options.tasks()) {
            tasks.add(new GenericRecordBuilder(taskSchema)
                .set("task_id", idPrompt[0])
                .set("prompt", idPrompt[1])
                .set("required_capabilities", options.capabilities())
                .build());
        }
        return new GenericRecordBuilder(schema)
            .set("event_id", UUID.randomUUID().toString().replace("-", ""))
            .set("occurred_at", System.currentTimeMillis())
            .set("correlation_id", options.missionId())
            .set("causation_id", null)
            .set("producer", "client:java")
            .set("mission_id", options.missionId())
            .set("title", options.title())
            .set("region", options.region())
            .set("tasks", tasks)
            .set("submitted_by", "client:java")
            .build();
    }

    /** The highest vN.avsc of MissionSubmitted under the schemas folder. */
    static Path latestSchema(Path schemas) throws IOException {
        Path folder = schemas.resolve("avro/MissionSubmitted");
        try (Stream<Path> files = Files.list(folder)) {
            return files.filter(p -> p.getFileName().toString().matches("v\\d+\\.avsc"))
                .max(Comparator.comparingInt(p -> Integer.parseInt(p.getFileName().toString().replaceAll("\\D", ""))))
                .orElseThrow(() -> new IOException("no vN.avsc in " + folder));
        }
    }
}
