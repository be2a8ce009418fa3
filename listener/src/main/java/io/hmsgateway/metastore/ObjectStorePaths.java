package io.hmsgateway.metastore;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * Object-store locations (s3://bucket/key) for the embedded metastore, which has no Hadoop S3
 * connector (PySpark's jars ship no hadoop-aws). HMS only resolves a table's or database's
 * location and checks or creates its "directory" (Warehouse.getDnsPath, isDir, mkdirs); an
 * object store has no directories, so every path is one and creating one does nothing. Data is
 * never read, written or deleted here (Iceberg tables are external: clients and the gateway
 * write the files). Enable per scheme in hive-site.xml: fs.s3.impl=io.hmsgateway.metastore.ObjectStorePaths.
 * For tests and the demo only.
 */
public class ObjectStorePaths extends FileSystem {
    private URI uri;
    private Path workingDirectory = new Path("/");

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        setConf(conf);
        uri = URI.create(name.getScheme() + "://" + (name.getAuthority() == null ? "" : name.getAuthority()));
    }

    @Override
    public String getScheme() {
        return uri == null ? "s3" : uri.getScheme();
    }

    @Override
    public URI getUri() {
        return uri;
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        throw new FileNotFoundException("the metastore reads no objects: " + f);
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                     short replication, long blockSize, Progressable progress) throws IOException {
        throw new IOException("the metastore writes no objects: " + f);
    }

    @Override
    public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
        throw new IOException("the metastore writes no objects: " + f);
    }

    @Override
    public boolean rename(Path src, Path dst) {
        return true;  // a "directory" rename (alter_table of a managed table): nothing to move here
    }

    @Override
    public boolean delete(Path f, boolean recursive) {
        return true;  // data stays: the gateway or the engines delete objects themselves
    }

    @Override
    public FileStatus[] listStatus(Path f) {
        return new FileStatus[0];
    }

    @Override
    public void setWorkingDirectory(Path dir) {
        workingDirectory = dir;
    }

    @Override
    public Path getWorkingDirectory() {
        return workingDirectory;
    }

    @Override
    public boolean mkdirs(Path f, FsPermission permission) {
        return true;
    }

    @Override
    public FileStatus getFileStatus(Path f) {
        return new FileStatus(0, true, 1, 0, 0, makeQualified(f));
    }
}
