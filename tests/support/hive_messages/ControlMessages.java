import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.Function;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;

/**
 * Control messages for the decoding test: the message Hive 2.3's own JSONMessageFactory
 * builds for an event, from the same objects our builders were given (passed here as their
 * TJSONProtocol text and read back into Hive 2.3's Thrift classes). The input line
 *   {"id": "...", "control": {"eventType": "ADD_PARTITION", "table": "<tjson>",
 *     "partitions": ["<tjson>", ...], "partitionFiles": [{"partitionName": "...",
 *     "files": [...]}], ...}, "objects": {...}}
 * becomes the decoder's input line {"id", "eventType", "messageFormat", "message", "objects"}.
 */
public class ControlMessages {

  static ObjectNode build(JsonNode input, MessageFactory f) throws Exception {
    JsonNode c = input.get("control");
    String type = c.get("eventType").asText();
    EventMessage msg;
    switch (type) {
      case "CREATE_DATABASE":
        msg = f.buildCreateDatabaseMessage((Database) obj(c, "database", "Database"));
        break;
      case "DROP_DATABASE":
        msg = f.buildDropDatabaseMessage((Database) obj(c, "database", "Database"));
        break;
      case "CREATE_TABLE":
        msg = f.buildCreateTableMessage((Table) obj(c, "table", "Table"), strings(c, "files").iterator());
        break;
      case "ALTER_TABLE":
        msg = f.buildAlterTableMessage((Table) obj(c, "before", "Table"), (Table) obj(c, "after", "Table"));
        break;
      case "DROP_TABLE":
        msg = f.buildDropTableMessage((Table) obj(c, "table", "Table"));
        break;
      case "ADD_PARTITION": {
        List<PartitionFiles> files = new ArrayList<>();
        for (JsonNode pf : c.get("partitionFiles")) {
          files.add(new PartitionFiles(pf.get("partitionName").asText(), strings(pf, "files").iterator()));
        }
        msg = f.buildAddPartitionMessage((Table) obj(c, "table", "Table"),
            partitions(c, "partitions").iterator(), files.iterator());
        break;
      }
      case "ALTER_PARTITION":
        msg = f.buildAlterPartitionMessage((Table) obj(c, "table", "Table"),
            (Partition) obj(c, "before", "Partition"), (Partition) obj(c, "after", "Partition"));
        break;
      case "DROP_PARTITION":
        msg = f.buildDropPartitionMessage((Table) obj(c, "table", "Table"),
            partitions(c, "partitions").iterator());
        break;
      case "INSERT": {
        Map<String, String> keyVals = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = c.get("partKeyVals").fields();
        while (it.hasNext()) {
          Map.Entry<String, JsonNode> e = it.next();
          keyVals.put(e.getKey(), e.getValue().asText());
        }
        msg = f.buildInsertMessage(c.get("db").asText(), c.get("table").asText(), keyVals,
            strings(c, "files").iterator());
        break;
      }
      case "CREATE_FUNCTION":
        msg = f.buildCreateFunctionMessage((Function) obj(c, "function", "Function"));
        break;
      case "DROP_FUNCTION":
        msg = f.buildDropFunctionMessage((Function) obj(c, "function", "Function"));
        break;
      default:
        throw new IllegalArgumentException("Hive 2.3's JSONMessageFactory builds no " + type);
    }
    ObjectNode line = DecodeMessages.NF.objectNode();
    line.set("id", input.get("id"));
    line.put("eventType", type);
    line.put("messageFormat", f.getMessageFormat());
    line.put("message", msg.toString());
    if (input.has("objects")) {
      line.set("objects", input.get("objects"));
    }
    return line;
  }

  static Object obj(JsonNode c, String key, String cls) throws Exception {
    return DecodeMessages.getTObj(c.get(key).asText(), cls);
  }

  static List<Partition> partitions(JsonNode c, String key) throws Exception {
    List<Partition> out = new ArrayList<>();
    for (JsonNode p : c.get(key)) {
      out.add((Partition) DecodeMessages.getTObj(p.asText(), "Partition"));
    }
    return out;
  }

  static List<String> strings(JsonNode c, String key) {
    List<String> out = new ArrayList<>();
    for (JsonNode s : c.get(key)) {
      out.add(s.asText());
    }
    return out;
  }
}
