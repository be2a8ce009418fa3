/*
 * HMS Gateway: the embedded Hive Metastore 2.3's main class, with HMS's lock tables.
 *
 * HMS answers lock/check_lock/unlock/heartbeat (Iceberg's HiveCatalog commits under them)
 * from the transaction tables TXNS, HIVE_LOCKS, NEXT_LOCK_ID, ... in its own database.
 * DataNucleus' schema auto-creation does not make them and hive-metastore-2.3.10.jar ships
 * no schema scripts, but it has TxnDbUtil.prepDb, which creates them over the metastore's
 * JDBC connection (Hive's own tests use it on Derby). Derby embedded admits one JVM per
 * database, so the tables are made here, in HMS's own JVM, before HiveMetaStore.main runs.
 *
 * prepDb is not idempotent (it fails on the first existing table), so it runs only when
 * WRITE_SET, the last table it creates, is missing; a half-made set (a JVM killed during
 * prepDb, DDL commits one statement at a time) is dropped by TxnDbUtil.cleanDb first.
 */
package io.hmsgateway.metastore;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;

public final class EmbeddedMetastore {
  private static final String LAST_TXN_TABLE = "WRITE_SET";

  private EmbeddedMetastore() {}

  public static void main(String[] args) throws Throwable {
    HiveConf conf = new HiveConf();  // hive-site.xml from the classpath, as HMS reads it
    if (!txnTablesExist(conf)) {
      TxnDbUtil.cleanDb(conf);
      TxnDbUtil.prepDb(conf);
      System.err.println("EmbeddedMetastore: created HMS transaction and lock tables");
    }
    HiveMetaStore.main(args);
  }

  private static boolean txnTablesExist(HiveConf conf) throws Exception {
    String url = HiveConf.getVar(conf, HiveConf.ConfVars.METASTORECONNECTURLKEY);
    String user = HiveConf.getVar(conf, HiveConf.ConfVars.METASTORE_CONNECTION_USER_NAME);
    try (Connection conn = DriverManager.getConnection(url, user, "");
         ResultSet tables = conn.getMetaData().getTables(null, user.toUpperCase(), LAST_TXN_TABLE, null)) {
      return tables.next();
    }
  }
}
