/*
 * HMS Gateway: a notification-log listener for the embedded Hive Metastore 2.3.
 *
 * Writes one NotificationEvent per metastore change into HMS's own notification log
 * (RawStore.addNotificationEvent), in the form Hive's DbNotificationListener writes it
 * (hive-hcatalog-server-extensions, which the PySpark jars lack): message built by the
 * configured MessageFactory (JSONMessageFactory, format "json-0.2"), dbName/tableName set.
 * Consumers read the log with get_current_notificationEventId / get_next_notification.
 *
 * Configure it in hive-site.xml as
 *   hive.metastore.transactional.event.listeners = io.hmsgateway.listener.NotificationLogListener
 * so the log entry is written in the same JDO transaction as the change. A cleaner thread
 * deletes entries older than hive.metastore.event.db.listener.timetolive (seconds, HMS's
 * key and default); it runs every hms.gateway.listener.cleaner.interval seconds (default 60,
 * as DbNotificationListener's cleaner; tests set 1).
 *
 * Differences from DbNotificationListener: file lists (CREATE_TABLE/ADD_PARTITION "files")
 * are left empty (the gateway's change feed does not use them); each message gets a "user"
 * member: the short name of the user HMS acted as for the call (UserGroupInformation's current
 * user in the handler thread: the set_ugi user under TUGIBasedProcessor's doAs, the Kerberos
 * or proxy user under SASL, HMS's own user when the client asserted none; the user HMS's audit
 * log names as ugi=). Hive's JSONMessageDeserializer ignores unknown members, so Hive's own
 * readers of the log are unaffected.
 */
package io.hmsgateway.listener;

import java.io.IOException;
import java.util.Collections;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore.HMSHandler;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.MetaStoreEventListenerConstants;
import org.apache.hadoop.hive.metastore.RawStore;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.Function;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateFunctionEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropFunctionEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.InsertEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;
import org.apache.hadoop.security.UserGroupInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

public class NotificationLogListener extends MetaStoreEventListener {
  private static final Logger LOG = LoggerFactory.getLogger(NotificationLogListener.class);
  static final String CLEANER_INTERVAL_KEY = "hms.gateway.listener.cleaner.interval";
  // One cleaner per JVM, however many handlers HMS builds listeners for.
  private static final Object CLEANER_LOCK = new Object();
  private static Thread cleaner;

  private static final ObjectMapper JSON = new ObjectMapper();

  private final MessageFactory messages = MessageFactory.getInstance();

  public NotificationLogListener(Configuration conf) {
    super(conf);
    startCleaner(conf);
  }

  private static void startCleaner(Configuration conf) {
    final int ttl = (int) HiveConf.getTimeVar(
        conf, HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL, TimeUnit.SECONDS);
    final long intervalMs = 1000L * conf.getLong(CLEANER_INTERVAL_KEY, 60L);
    final Configuration cleanerConf = new Configuration(conf);
    synchronized (CLEANER_LOCK) {
      if (cleaner != null) {
        return;
      }
      cleaner = new Thread(() -> {
        while (true) {
          try {
            Thread.sleep(intervalMs);
            RawStore store = HMSHandler.getMSForConf(cleanerConf);
            store.cleanNotificationEvents(ttl);
          } catch (InterruptedException e) {
            return;
          } catch (Exception e) {
            LOG.warn("notification log cleaning failed; retrying next interval", e);
          }
        }
      }, "notification-log-cleaner");
      cleaner.setDaemon(true);
      cleaner.start();
    }
  }

  private static int now() {
    return (int) (System.currentTimeMillis() / 1000);
  }

  private void log(ListenerEvent source, String type, String db, String table, String message)
      throws MetaException {
    if (!source.getStatus()) {
      return; // the change failed: nothing happened to log
    }
    NotificationEvent event = new NotificationEvent(0, now(), type, withUser(message));
    event.setMessageFormat(messages.getMessageFormat());
    if (db != null) {
      event.setDbName(db);
    }
    if (table != null) {
      event.setTableName(table);
    }
    RawStore store = HMSHandler.getMSForConf(getConf());
    store.addNotificationEvent(event);
    if (event.isSetEventId()) {
      source.putParameter(MetaStoreEventListenerConstants.DB_NOTIFICATION_EVENT_ID_KEY_NAME,
          Long.toString(event.getEventId()));
    }
  }

  /** The message with a "user" member added (the acting user's short name, or null when the
   *  handler thread has none); a message that is not a JSON object is left as it is. */
  static String withUser(String message) {
    String user;
    try {
      user = UserGroupInformation.getCurrentUser().getShortUserName();
    } catch (IOException e) {
      user = null;
    }
    try {
      JsonNode tree = JSON.readTree(message);
      if (!(tree instanceof ObjectNode)) {
        return message;
      }
      ((ObjectNode) tree).put("user", user);
      return JSON.writeValueAsString(tree);
    } catch (IOException e) {
      return message;
    }
  }

  private static Iterator<String> noFiles() {
    return Collections.<String>emptyIterator();
  }

  private static Iterator<PartitionFiles> noPartitionFiles() {
    return Collections.<PartitionFiles>emptyIterator();
  }

  @Override
  public void onCreateDatabase(CreateDatabaseEvent e) throws MetaException {
    Database d = e.getDatabase();
    log(e, "CREATE_DATABASE", d.getName(), null,
        messages.buildCreateDatabaseMessage(d).toString());
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent e) throws MetaException {
    Database d = e.getDatabase();
    if (d == null || !e.getStatus()) {
      // HMS 2.3 notifies a failed drop of a missing database with no Database: a throw here
      // would hide its NoSuchObjectException from the client.
      return;
    }
    log(e, "DROP_DATABASE", d.getName(), null, messages.buildDropDatabaseMessage(d).toString());
  }

  @Override
  public void onCreateTable(CreateTableEvent e) throws MetaException {
    Table t = e.getTable();
    log(e, "CREATE_TABLE", t.getDbName(), t.getTableName(),
        messages.buildCreateTableMessage(t, noFiles()).toString());
  }

  @Override
  public void onDropTable(DropTableEvent e) throws MetaException {
    Table t = e.getTable();
    log(e, "DROP_TABLE", t.getDbName(), t.getTableName(),
        messages.buildDropTableMessage(t).toString());
  }

  @Override
  public void onAlterTable(AlterTableEvent e) throws MetaException {
    Table before = e.getOldTable();
    Table after = e.getNewTable();
    log(e, "ALTER_TABLE", after.getDbName(), after.getTableName(),
        messages.buildAlterTableMessage(before, after).toString());
  }

  @Override
  public void onAddPartition(AddPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    log(e, "ADD_PARTITION", t.getDbName(), t.getTableName(),
        messages.buildAddPartitionMessage(t, e.getPartitionIterator(), noPartitionFiles()).toString());
  }

  @Override
  public void onDropPartition(DropPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    log(e, "DROP_PARTITION", t.getDbName(), t.getTableName(),
        messages.buildDropPartitionMessage(t, e.getPartitionIterator()).toString());
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    log(e, "ALTER_PARTITION", t.getDbName(), t.getTableName(),
        messages.buildAlterPartitionMessage(t, e.getOldPartition(), e.getNewPartition()).toString());
  }

  @Override
  public void onCreateFunction(CreateFunctionEvent e) throws MetaException {
    Function f = e.getFunction();
    log(e, "CREATE_FUNCTION", f.getDbName(), null,
        messages.buildCreateFunctionMessage(f).toString());
  }

  @Override
  public void onDropFunction(DropFunctionEvent e) throws MetaException {
    Function f = e.getFunction();
    log(e, "DROP_FUNCTION", f.getDbName(), null, messages.buildDropFunctionMessage(f).toString());
  }

  @Override
  public void onInsert(InsertEvent e) throws MetaException {
    log(e, "INSERT", e.getDb(), e.getTable(),
        messages.buildInsertMessage(e.getDb(), e.getTable(), e.getPartitionKeyValues(),
            e.getFiles().iterator()).toString());
  }
}
