// An HCatalog-style JMS subscriber, as seed 002 shows one: ActiveMQConnectionFactory, a topic,
// a consumer, HCAT_* string properties. Run with Java's source launcher against Debian's
// ActiveMQ client jars (tests/support/activemq.py: jms_consumer):
//   java -cp <jars> HcatJmsConsumer.java <broker url> <topic> <messages> <timeout seconds>
// Prints "READY" once subscribed, then one tab-separated line per message:
//   <JMS class> <destination> <HCAT_EVENT> <HCAT_MESSAGE_VERSION> <HCAT_MESSAGE_FORMAT> <text>
// and exits 0 after <messages> messages, 2 on timeout.

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.TextMessage;
import org.apache.activemq.ActiveMQConnectionFactory;

public class HcatJmsConsumer {
    public static void main(String[] args) throws Exception {
        int wanted = Integer.parseInt(args[2]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000L;
        Connection conn = new ActiveMQConnectionFactory(args[0]).createConnection();
        conn.start();
        Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer consumer = session.createConsumer(session.createTopic(args[1]));
        System.out.println("READY");
        System.out.flush();
        int seen = 0;
        while (seen < wanted) {
            long left = deadline - System.currentTimeMillis();
            Message msg = left > 0 ? consumer.receive(left) : null;
            if (msg == null) {
                conn.close();
                System.exit(2);
            }
            String text = msg instanceof TextMessage ? ((TextMessage) msg).getText() : "";
            System.out.println(String.join("\t", msg.getClass().getSimpleName(),
                String.valueOf(msg.getJMSDestination()),
                msg.getStringProperty("HCAT_EVENT"), msg.getStringProperty("HCAT_MESSAGE_VERSION"),
                msg.getStringProperty("HCAT_MESSAGE_FORMAT"), text));
            System.out.flush();
            seen++;
        }
        conn.close();
    }
}
