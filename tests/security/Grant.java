import java.io.FileInputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Allows principals every operation on the topics, groups and transactional ids whose names start with some prefixes,
 * through Kafka's Admin API (aiokafka has no CreateAcls, and the release jars have no kafka-acls tool).
 *
 * <p>Usage: java -cp 'libs/*' Grant.java client.properties User:a,User:b prefix1,prefix2
 */
public class Grant {
  public static void main(String[] args) throws Exception {
    Properties client = new Properties();
    try (FileInputStream in = new FileInputStream(args[0])) {
      client.load(in);
    }
    List<AclBinding> bindings = new ArrayList<>();
    for (String principal : args[1].split(",")) {
      for (String prefix : args[2].split(",")) {
        for (ResourceType type : List.of(ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)) {
          bindings.add(
              new AclBinding(
                  new ResourcePattern(type, prefix, PatternType.PREFIXED),
                  new AccessControlEntry(principal, "*", AclOperation.ALL, AclPermissionType.ALLOW)));
        }
      }
    }
    try (Admin admin = Admin.create(client)) {
      admin.createAcls(bindings).all().get();
    }
    System.out.println("granted " + bindings.size() + " ACLs");
  }
}
