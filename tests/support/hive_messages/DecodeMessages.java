import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.GZIPInputStream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageDeserializer;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.thrift.TBase;
import org.apache.thrift.TDeserializer;
import org.apache.thrift.TEnum;
import org.apache.thrift.TFieldIdEnum;
import org.apache.thrift.meta_data.FieldMetaData;
import org.apache.thrift.protocol.TJSONProtocol;

/**
 * hms-txn's test harness: decodes notification messages with Hive 2.3's own classes (the
 * hive-metastore jar PySpark ships), the way a Hive 2.3 reader does.
 *
 * Reads JSON lines on stdin. A line is either an event to decode
 *   {"id": "...", "eventType": "CREATE_TABLE", "messageFormat": "json-0.2", "message": "...",
 *    "objects": {"tableObjJson": "Table", "partitionListJson": "Partition", ...}}
 * or a control to build first with Hive 2.3's JSONMessageFactory (ControlMessages) and then
 * decode: {"id": "...", "control": {...}}.
 *
 * For each it prints one JSON line:
 *   - "known": whether Hive 2.3's EventMessage.EventType has the type;
 *   - "dispatch": MessageDeserializer.getEventMessage(type, message) (the class, or the error);
 *   - "getters": for a known type, the typed getter (getCreateTableMessage, ...) and then every
 *     public no-argument getter of the message it returns, each rendered as JSON or as
 *     {"error": ...} when it throws (the NullPointerException a reader gets for a missing key);
 *   - "objects": each named key of the message decoded the way Hive's MessageBuilder.getTObj
 *     does (TDeserializer + TJSONProtocol) into the named Hive 2.3 Thrift class;
 *   - "fields": the fields (name: Thrift field id) of every Thrift class rendered, so the
 *     caller can compare decoded objects with the fields Hive 2.3 knows.
 * A "gzip(json-2.0)" message is first base64-decoded and gunzipped, as Hive 4's gzip
 * DeSerializer does before it hands the text to the JSON deserializer.
 *
 * Thrift objects are rendered field by field: set fields only, by field name; enums as their
 * numbers, binary as base64, maps with string keys.
 */
public class DecodeMessages {
  static final ObjectMapper MAPPER = new ObjectMapper();
  static final JsonNodeFactory NF = JsonNodeFactory.instance;
  static final String API = "org.apache.hadoop.hive.metastore.api.";

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
    System.setOut(System.err);   // Hive's start-up logging must not reach our output
    MessageFactory factory = MessageFactory.getInstance();
    MessageDeserializer deserializer = factory.getDeserializer();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.trim().isEmpty()) {
        continue;
      }
      JsonNode input = MAPPER.readTree(line);
      ObjectNode result = NF.objectNode();
      result.set("id", input.get("id"));
      result.put("factoryFormat", factory.getMessageFormat());
      result.put("deserializer", deserializer.getClass().getName());
      try {
        if (input.has("control")) {
          input = ControlMessages.build(input, factory);
          result.put("message", input.get("message").asText());
        }
        decode(deserializer, input, result);
      } catch (Throwable e) {
        result.set("failure", error(e));
      }
      out.println(MAPPER.writeValueAsString(result));
    }
  }

  static void decode(MessageDeserializer deserializer, JsonNode input, ObjectNode result)
      throws Exception {
    String type = input.get("eventType").asText();
    String format = input.path("messageFormat").asText("json-0.2");
    String message = input.get("message").asText();
    result.put("eventType", type);
    result.put("messageFormat", format);
    if (format.toLowerCase().startsWith("gzip")) {
      message = gunzip(message);
    }
    TreeMap<String, ObjectNode> fields = new TreeMap<>();
    boolean known = true;
    try {
      EventMessage.EventType.valueOf(type);
    } catch (IllegalArgumentException e) {
      known = false;
    }
    result.put("known", known);
    try {
      Object msg = deserializer.getEventMessage(type, message);
      result.put("dispatch", msg == null ? "null" : msg.getClass().getName());
    } catch (Throwable e) {
      result.set("dispatch", error(e));
    }
    if (known) {
      String name = "get" + camel(type) + "Message";
      Method typed = deserializer.getClass().getMethod(name, String.class);
      result.put("typedGetter", name);
      Object msg;
      try {
        msg = typed.invoke(deserializer, message);
        result.put("messageClass", msg.getClass().getName());
        result.set("getters", getters(msg, fields, 0));
      } catch (Throwable e) {
        result.set("getters", error(e));
      }
    }
    ObjectNode objects = result.putObject("objects");
    JsonNode body = MAPPER.readTree(message);
    Iterator<Map.Entry<String, JsonNode>> wanted = input.path("objects").fields();
    while (wanted.hasNext()) {
      Map.Entry<String, JsonNode> entry = wanted.next();
      String key = entry.getKey();
      String cls = entry.getValue().asText();
      JsonNode value = body.get(key);
      try {
        if (value == null || value.isNull()) {
          objects.putNull(key);
        } else if (value.isArray()) {
          ArrayNode list = objects.putArray(key);
          for (JsonNode element : value) {
            list.add(element.isNull() ? NF.nullNode() : render(getTObj(element.asText(), cls), fields, 0));
          }
        } else {
          objects.set(key, render(getTObj(value.asText(), cls), fields, 0));
        }
      } catch (Throwable e) {
        objects.set(key, error(e));
      }
    }
    ObjectNode known2 = result.putObject("fields");
    for (Map.Entry<String, ObjectNode> e : fields.entrySet()) {
      known2.set(e.getKey(), e.getValue());
    }
  }

  /** MessageBuilder.getTObj / JSONMessageFactory.getTObj: TDeserializer over TJSONProtocol. */
  @SuppressWarnings({"rawtypes"})
  static TBase getTObj(String text, String simpleName) throws Exception {
    TBase obj = (TBase) Class.forName(API + simpleName).getDeclaredConstructor().newInstance();
    new TDeserializer(new TJSONProtocol.Factory()).deserialize(obj, text, "UTF-8");
    return obj;
  }

  static String gunzip(String text) throws Exception {
    byte[] zipped = Base64.getDecoder().decode(text);
    try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(zipped))) {
      ByteArrayOutputStream buf = new ByteArrayOutputStream();
      in.transferTo(buf);
      return buf.toString(StandardCharsets.UTF_8);
    }
  }

  /** Every public no-argument getX/isX of a message, by name (getClass and friends left out). */
  static ObjectNode getters(Object obj, TreeMap<String, ObjectNode> fields, int depth) {
    ObjectNode node = NF.objectNode();
    List<Method> methods = new ArrayList<>();
    for (Method m : obj.getClass().getMethods()) {
      String n = m.getName();
      if (m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers())
          || n.equals("getClass") || n.equals("hashCode") || n.equals("toString")) {
        continue;
      }
      if ((n.startsWith("get") && n.length() > 3) || (n.startsWith("is") && n.length() > 2)) {
        methods.add(m);
      }
    }
    methods.sort(Comparator.comparing(Method::getName));
    for (Method m : methods) {
      try {
        node.set(m.getName(), render(m.invoke(obj), fields, depth + 1));
      } catch (Throwable e) {
        node.set(m.getName(), error(e));
      }
    }
    return node;
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static JsonNode render(Object v, TreeMap<String, ObjectNode> fields, int depth) throws Exception {
    if (v == null) {
      return NF.nullNode();
    }
    if (v instanceof TBase) {
      TBase obj = (TBase) v;
      ObjectNode o = NF.objectNode();
      Map<? extends TFieldIdEnum, FieldMetaData> meta =
          FieldMetaData.getStructMetaDataMap(obj.getClass());
      String cls = obj.getClass().getSimpleName();
      if (!fields.containsKey(cls)) {
        ObjectNode ids = NF.objectNode();
        for (Map.Entry<? extends TFieldIdEnum, FieldMetaData> f : meta.entrySet()) {
          ids.put(f.getValue().fieldName, f.getKey().getThriftFieldId());
        }
        fields.put(cls, ids);
      }
      for (Map.Entry<? extends TFieldIdEnum, FieldMetaData> f : meta.entrySet()) {
        if (obj.isSet(f.getKey())) {
          o.set(f.getValue().fieldName, render(obj.getFieldValue(f.getKey()), fields, depth + 1));
        }
      }
      return o;
    }
    if (v instanceof TEnum) {
      return NF.numberNode(((TEnum) v).getValue());
    }
    if (v instanceof ByteBuffer || v instanceof byte[]) {
      byte[] bytes = v instanceof byte[] ? (byte[]) v : toArray((ByteBuffer) v);
      return NF.textNode(Base64.getEncoder().encodeToString(bytes));
    }
    if (v instanceof String) {
      return NF.textNode((String) v);
    }
    if (v instanceof Boolean) {
      return NF.booleanNode((Boolean) v);
    }
    if (v instanceof Number) {
      return MAPPER.valueToTree(v);
    }
    if (v instanceof Enum) {
      return NF.textNode(((Enum<?>) v).name());
    }
    if (v instanceof Map) {
      ObjectNode o = NF.objectNode();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        o.set(String.valueOf(e.getKey()), render(e.getValue(), fields, depth + 1));
      }
      return o;
    }
    Iterator<?> it = v instanceof Iterable ? ((Iterable<?>) v).iterator()
        : v instanceof Iterator ? (Iterator<?>) v : null;
    if (it != null) {
      ArrayNode a = NF.arrayNode();
      while (it.hasNext()) {
        a.add(render(it.next(), fields, depth + 1));
      }
      return a;
    }
    if (depth > 6) {
      return NF.textNode(String.valueOf(v));
    }
    ObjectNode o = getters(v, fields, depth);   // a plain bean, e.g. PartitionFiles
    o.put("_class", v.getClass().getSimpleName());
    return o;
  }

  static byte[] toArray(ByteBuffer b) {
    ByteBuffer d = b.duplicate();
    byte[] out = new byte[d.remaining()];
    d.get(out);
    return out;
  }

  /** {"error": "<exception>: <message>", "cause": "<root cause>"}, unwrapping reflection. */
  static ObjectNode error(Throwable e) {
    while (e instanceof InvocationTargetException && e.getCause() != null) {
      e = e.getCause();
    }
    ObjectNode o = NF.objectNode();
    o.put("error", e.getClass().getName() + ": " + e.getMessage());
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    if (root != e) {
      o.put("cause", root.getClass().getName() + ": " + root.getMessage());
    }
    StackTraceElement[] st = root.getStackTrace();
    if (st.length > 0) {
      o.put("at", st[0].toString());
    }
    return o;
  }

  /** ALTER_TABLE -> AlterTable. */
  static String camel(String type) {
    StringBuilder sb = new StringBuilder();
    for (String part : type.toLowerCase().split("_")) {
      if (!part.isEmpty()) {
        sb.append(Character.toUpperCase(part.charAt(0))).append(part.substring(1));
      }
    }
    return sb.toString();
  }
}
